//! A cron line's command as `/bin/sh` reads it, as far as an import needs to know: its words
//! (quotes removed, where each is written), the operators between them, and its redirections. One
//! pass over the line; anything this does not follow (a here-document, an unclosed quote) is an
//! error that names it, and any expansion other than a leading `~` or `$HOME` marks its word as
//! not literal, so the caller keeps such a line in a shell.

/// A word as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// Where it is written in the line (bytes).
    pub span: (usize, usize),
    /// Its value with quotes removed; after a leading home form, the rest (`/bin/x.sh` or "").
    pub text: String,
    /// It begins with `~`, `$HOME`, `${HOME}` or `${HOME:-…}` (unquoted): `text` is below home.
    pub home: bool,
    /// Nothing in it is expanded by the shell but that leading home form: no `$`, backquote or
    /// unquoted glob.
    pub literal: bool,
    /// Written `NAME=…` with an unquoted `=` after a name: an assignment in command position.
    pub assignment: bool,
}

/// What separates or shapes commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `|` (and `|&`).
    Pipe,
    /// `&&`, `||`, `;`, `&`: one command list after another.
    List,
    /// `(`, `)`: a subshell.
    Group,
    /// An output redirection: `>`, `>>`, `>|`, `&>`, `>&`, with its file descriptor.
    Out,
    /// An input redirection or a here-document: `<`, `<<`, `<>`, `<&`.
    In,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    Word(Word),
    Op(Op, (usize, usize)),
}

/// The tokens of `line`, or what in it is not followed.
pub fn tokens(line: &str) -> Result<Vec<Token>, String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b' ' || c == b'\t' {
            i += 1;
            continue;
        }
        if c == b'#' {
            // A comment runs to the end of the line; it is no part of the command.
            break;
        }
        if let Some((op, len)) = operator(&b[i..]) {
            if op == Op::In && b[i..].starts_with(b"<<") {
                return Err("it has a here-document (<<), which a cron line cannot hold".into());
            }
            out.push(Token::Op(op, (i, i + len)));
            i += len;
            continue;
        }
        // An IO number: digits right before a redirection.
        let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0
            && let Some((op @ (Op::Out | Op::In), len)) = operator(&b[i + digits..])
        {
            out.push(Token::Op(op, (i, i + digits + len)));
            i += digits + len;
            continue;
        }
        let (word, end) = word(line, i)?;
        out.push(Token::Word(word));
        i = end;
    }
    Ok(out)
}

/// The operator at the start of `b`, and its length.
fn operator(b: &[u8]) -> Option<(Op, usize)> {
    const OPS: [(&[u8], Op); 16] = [
        (b"&>>", Op::Out),
        (b"&&", Op::List),
        (b"||", Op::List),
        (b"|&", Op::Pipe),
        (b">>", Op::Out),
        (b">|", Op::Out),
        (b">&", Op::Out),
        (b"&>", Op::Out),
        (b"<<", Op::In),
        (b"<>", Op::In),
        (b"<&", Op::In),
        (b"|", Op::Pipe),
        (b";", Op::List),
        (b"&", Op::List),
        (b">", Op::Out),
        (b"<", Op::In),
    ];
    if let Some(b'(' | b')') = b.first() {
        return Some((Op::Group, 1));
    }
    OPS.iter()
        .find(|(s, _)| b.starts_with(s))
        .map(|(s, op)| (*op, s.len()))
}

/// The word starting at byte `start`, and where it ends.
fn word(line: &str, start: usize) -> Result<(Word, usize), String> {
    let b = line.as_bytes();
    let mut text = String::new();
    let mut literal = true;
    let mut i = start;
    let home = match home_form(line, i) {
        Some(after) => {
            i = after;
            true
        }
        None => false,
    };
    let mut assignment = false;
    let mut name_so_far = !home;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b';' | b'|' | b'&' | b'>' | b'<' | b'(' | b')' => break,
            b'\'' => {
                let close = line[i + 1..]
                    .find('\'')
                    .ok_or("it has a ' that is never closed")?;
                text.push_str(&line[i + 1..i + 1 + close]);
                i += close + 2;
                name_so_far = false;
            }
            b'"' => {
                i = double_quoted(line, i, &mut text, &mut literal)?;
                name_so_far = false;
            }
            b'\\' => {
                let ch = line[i + 1..].chars().next();
                match ch {
                    Some(ch) => {
                        text.push(ch);
                        i += 1 + ch.len_utf8();
                    }
                    None => i += 1,
                }
                name_so_far = false;
            }
            b'=' if name_so_far && !text.is_empty() => {
                assignment = true;
                name_so_far = false;
                text.push('=');
                i += 1;
            }
            _ => {
                let ch = line[i..].chars().next().unwrap_or_default();
                if matches!(ch, '$' | '`' | '*' | '?' | '[' | '{' | '~') {
                    literal = false;
                }
                if name_so_far && !(ch.is_ascii_alphanumeric() || ch == '_') {
                    name_so_far = false;
                }
                text.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    Ok((
        Word {
            span: (start, i),
            text,
            home,
            literal,
            assignment,
        },
        i,
    ))
}

/// Where a leading home form (`~`, `$HOME`, `${HOME}`, `${HOME:-…}`), unquoted and followed by
/// `/` or the word's end, ends.
fn home_form(line: &str, i: usize) -> Option<usize> {
    let b = line.as_bytes();
    let ends_word = |at: usize| {
        at == b.len()
            || matches!(
                b[at],
                b'/' | b' ' | b'\t' | b';' | b'|' | b'&' | b'>' | b'<' | b')'
            )
    };
    for form in ["${HOME}", "$HOME", "~"] {
        if line[i..].starts_with(form) && ends_word(i + form.len()) {
            return Some(i + form.len());
        }
    }
    if line[i..].starts_with("${HOME:-") || line[i..].starts_with("${HOME-") {
        // What follows `:-` is a default for an unset HOME; cron always sets it.
        let after = i + line[i..].find('}')? + 1;
        return (after == b.len() || b[after] == b'/').then_some(after);
    }
    None
}

/// Reads the double-quoted part at `i` into `text` (`$` and backquote keep their meaning: the
/// word is then not literal); where it ends.
fn double_quoted(
    line: &str,
    i: usize,
    text: &mut String,
    literal: &mut bool,
) -> Result<usize, String> {
    let b = line.as_bytes();
    let mut j = i + 1;
    loop {
        match b.get(j) {
            None => return Err("it has a \" that is never closed".into()),
            Some(b'"') => return Ok(j + 1),
            Some(b'\\') if matches!(b.get(j + 1), Some(b'"' | b'\\' | b'$' | b'`')) => {
                text.push(b[j + 1] as char);
                j += 2;
            }
            Some(c) => {
                if matches!(c, b'$' | b'`') {
                    *literal = false;
                }
                let ch = line[j..].chars().next().unwrap_or_default();
                text.push(ch);
                j += ch.len_utf8();
            }
        }
    }
}

/// One simple command: its words and the targets of its redirections.
#[derive(Debug, Default)]
pub struct Simple<'t> {
    pub words: Vec<&'t Word>,
    /// Output redirections: the operator's span and its target word (none for `>&2` written
    /// together with its number).
    pub outs: Vec<((usize, usize), Option<&'t Word>)>,
    /// An input redirection or here-document is present.
    pub input: bool,
}

/// The simple commands of `tokens`, and whether anything joins them (a pipe, a list, a group).
pub fn commands(tokens: &[Token]) -> (Vec<Simple<'_>>, bool) {
    let mut all = vec![Simple::default()];
    let mut joined = false;
    let mut it = tokens.iter().peekable();
    while let Some(t) = it.next() {
        let current = all.last_mut().expect("one at least");
        match t {
            Token::Word(w) => current.words.push(w),
            Token::Op(Op::Out, span) => {
                let target = match it.peek() {
                    Some(Token::Word(w)) => {
                        it.next();
                        Some(w)
                    }
                    _ => None,
                };
                current.outs.push((*span, target));
            }
            Token::Op(Op::In, _) => {
                current.input = true;
                if let Some(Token::Word(_)) = it.peek() {
                    it.next();
                }
            }
            Token::Op(Op::Pipe | Op::List | Op::Group, _) => {
                joined = true;
                all.push(Simple::default());
            }
        }
    }
    all.retain(|c| !c.words.is_empty() || !c.outs.is_empty() || c.input);
    (all, joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        tokens(line)
            .unwrap()
            .into_iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some(w.text),
                Token::Op(..) => None,
            })
            .collect()
    }

    #[test]
    fn words_lose_their_quotes_and_only_spaces_and_tabs_split() {
        assert_eq!(words("a 'b c' \"d $e\" f\\ g"), ["a", "b c", "d $e", "f g"]);
        // A no-break space is part of a word, as sh reads it.
        assert_eq!(words("echo a\u{a0}b"), ["echo", "a\u{a0}b"]);
        assert!(tokens("echo 'open").unwrap_err().contains("never closed"));
        assert!(tokens("cat <<EOF").unwrap_err().contains("here-document"));
    }

    #[test]
    fn home_forms_and_expansions() {
        let t = tokens("~/a.sh $HOME/b ${HOME}/c ${HOME:-/x}/d ~bob/e $X/f '~/g'").unwrap();
        let w: Vec<(&str, bool, bool)> = t
            .iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some((w.text.as_str(), w.home, w.literal)),
                Token::Op(..) => None,
            })
            .collect();
        assert_eq!(
            w,
            [
                ("/a.sh", true, true),
                ("/b", true, true),
                ("/c", true, true),
                ("/d", true, true),
                ("~bob/e", false, false),
                ("$X/f", false, false),
                ("~/g", false, true),
            ]
        );
    }

    #[test]
    fn redirections_pipes_and_lists() {
        let t = tokens("x.sh --a > /tmp/log 2>&1").unwrap();
        let (cmds, joined) = commands(&t);
        assert!(!joined);
        assert_eq!(cmds.len(), 1);
        assert_eq!(cmds[0].words.len(), 2);
        assert_eq!(cmds[0].outs.len(), 2);
        assert_eq!(cmds[0].outs[0].1.unwrap().text, "/tmp/log");
        let t = tokens("cd /srv && ./r.sh | logger -t r; echo done &").unwrap();
        let (cmds, joined) = commands(&t);
        assert!(joined);
        let firsts: Vec<&str> = cmds.iter().map(|c| c.words[0].text.as_str()).collect();
        assert_eq!(firsts, ["cd", "./r.sh", "logger", "echo"]);
        let t = tokens("A=1 run.sh < in").unwrap();
        let (cmds, _) = commands(&t);
        assert!(cmds[0].words[0].assignment && cmds[0].input);
    }
}
