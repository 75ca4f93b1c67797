//! A blocking W3C WebDriver client for the dashboard's browser tests: JSON over HTTP to
//! chromedriver on loopback, through the `reqwest` the binary already builds. Only the commands
//! the tests use (the W3C WebDriver spec, "Endpoints"). A WebDriver crate pulled a second build of
//! every dependency into `make test` (its proc macros turned on other features of `syn`), which
//! cost more than this file.

use serde_json::{Value, json};

/// The key of an element reference in WebDriver's JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// What a command answered when it failed: WebDriver's error code and message.
#[derive(Debug)]
pub struct WdError(pub String);

impl std::fmt::Display for WdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Result<T> = std::result::Result<T, WdError>;

/// How an element is found.
#[derive(Clone, Copy, Debug)]
pub enum Locator<'a> {
    Css(&'a str),
}

/// One browser session.
pub struct Client {
    http: reqwest::blocking::Client,
    base: String,
}

/// An element of the page, as the session knows it.
pub struct Element<'c> {
    client: &'c Client,
    id: String,
}

impl Client {
    /// A new session on the WebDriver server at `server` with these `alwaysMatch` capabilities.
    pub fn connect(server: &str, capabilities: Value) -> Result<Self> {
        let http = reqwest::blocking::Client::builder()
            .timeout(std::time::Duration::from_secs(120))
            .build()
            .map_err(|e| WdError(e.to_string()))?;
        let answer = send(
            &http,
            reqwest::Method::POST,
            &format!("{server}/session"),
            Some(json!({"capabilities": {"alwaysMatch": capabilities}})),
        )?;
        let id = answer["sessionId"]
            .as_str()
            .ok_or_else(|| WdError(format!("no session id in {answer}")))?;
        Ok(Self {
            http,
            base: format!("{server}/session/{id}"),
        })
    }

    fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value> {
        send(&self.http, method, &format!("{}{path}", self.base), body)
    }

    fn post(&self, path: &str, body: Value) -> Result<Value> {
        self.call(reqwest::Method::POST, path, Some(body))
    }

    fn get(&self, path: &str) -> Result<Value> {
        self.call(reqwest::Method::GET, path, None)
    }

    pub fn goto(&self, url: &str) -> Result<()> {
        self.post("/url", json!({"url": url})).map(drop)
    }

    pub fn current_url(&self) -> Result<String> {
        string(self.get("/url")?)
    }

    pub fn source(&self) -> Result<String> {
        string(self.get("/source")?)
    }

    pub fn find(&self, by: Locator<'_>) -> Result<Element<'_>> {
        let v = self.post("/element", locate(by))?;
        self.element(&v)
    }

    pub fn find_all(&self, by: Locator<'_>) -> Result<Vec<Element<'_>>> {
        let v = self.post("/elements", locate(by))?;
        v.as_array()
            .ok_or_else(|| WdError(format!("not a list: {v}")))?
            .iter()
            .map(|e| self.element(e))
            .collect()
    }

    fn element(&self, v: &Value) -> Result<Element<'_>> {
        let id = v[ELEMENT]
            .as_str()
            .ok_or_else(|| WdError(format!("not an element: {v}")))?;
        Ok(Element {
            client: self,
            id: id.to_owned(),
        })
    }

    /// Runs `script` in the page (a function body: `return …`) and answers what it returned.
    pub fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.post("/execute/sync", json!({"script": script, "args": args}))
    }

    /// The text of the open dialog; an error when none is open.
    pub fn get_alert_text(&self) -> Result<String> {
        string(self.get("/alert/text")?)
    }

    pub fn set_window_size(&self, width: u32, height: u32) -> Result<()> {
        self.post("/window/rect", json!({"width": width, "height": height}))
            .map(drop)
    }

    /// The page as a PNG.
    pub fn screenshot(&self) -> Result<Vec<u8>> {
        base64_decode(&string(self.get("/screenshot")?)?)
    }

    /// Ends the session (and its browser).
    pub fn close(self) -> Result<()> {
        self.call(reqwest::Method::DELETE, "", None).map(drop)
    }
}

impl Element<'_> {
    fn path(&self, what: &str) -> String {
        format!("/element/{}/{what}", self.id)
    }

    pub fn attr(&self, name: &str) -> Result<Option<String>> {
        let v = self.client.get(&self.path(&format!("attribute/{name}")))?;
        Ok(v.as_str().map(str::to_owned))
    }

    pub fn text(&self) -> Result<String> {
        string(self.client.get(&self.path("text"))?)
    }

    pub fn click(&self) -> Result<()> {
        self.client.post(&self.path("click"), json!({})).map(drop)
    }

    pub fn clear(&self) -> Result<()> {
        self.client.post(&self.path("clear"), json!({})).map(drop)
    }

    /// Types `text` into it (`\u{e007}` is Enter).
    pub fn send_keys(&self, text: &str) -> Result<()> {
        self.client
            .post(&self.path("value"), json!({"text": text}))
            .map(drop)
    }

    pub fn is_enabled(&self) -> Result<bool> {
        let v = self.client.get(&self.path("enabled"))?;
        v.as_bool()
            .ok_or_else(|| WdError(format!("not a boolean: {v}")))
    }

    pub fn is_displayed(&self) -> Result<bool> {
        let v = self.client.get(&self.path("displayed"))?;
        v.as_bool()
            .ok_or_else(|| WdError(format!("not a boolean: {v}")))
    }
}

/// An element goes into a script's arguments as WebDriver's element reference.
impl serde::Serialize for Element<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(ELEMENT, &self.id)?;
        m.end()
    }
}

/// WebDriver's Enter key, for `send_keys`.
pub const ENTER: char = '\u{e007}';

fn locate(by: Locator<'_>) -> Value {
    match by {
        Locator::Css(css) => json!({"using": "css selector", "value": css}),
    }
}

fn string(v: Value) -> Result<String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| WdError(format!("not a string: {v}")))
}

/// One command: its answer's `value`, or the error it carries.
fn send(
    http: &reqwest::blocking::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value> {
    let mut req = http.request(method, url);
    if let Some(b) = body {
        req = req
            .header("Content-Type", "application/json")
            .body(b.to_string());
    }
    let resp = req.send().map_err(|e| WdError(e.to_string()))?;
    let ok = resp.status().is_success();
    let bytes = resp.bytes().map_err(|e| WdError(e.to_string()))?;
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| WdError(e.to_string()))?;
    let value = doc.get("value").cloned().unwrap_or(Value::Null);
    if ok {
        Ok(value)
    } else {
        Err(WdError(format!(
            "{}: {}",
            value["error"].as_str().unwrap_or("error"),
            value["message"].as_str().unwrap_or_default()
        )))
    }
}

/// Standard base64 (RFC 4648, with padding), as WebDriver sends screenshots.
fn base64_decode(text: &str) -> Result<Vec<u8>> {
    let value = |c: u8| -> Result<u32> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(WdError(format!("not base64: {:?}", c as char))),
        } as u32)
    };
    let bytes: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().filter(|&&b| b == b'=').count();
        let mut n = 0u32;
        for &c in chunk {
            n = (n << 6) | if c == b'=' { 0 } else { value(c)? };
        }
        n <<= 6 * (4 - chunk.len()) as u32;
        let three = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&three[..3 - pad.min(2)]);
    }
    Ok(out)
}

#[test]
fn base64_decodes_what_python_encodes() {
    assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
    assert_eq!(base64_decode("aGVsbG8hIQ==").unwrap(), b"hello!!");
    assert_eq!(base64_decode("YWJj").unwrap(), b"abc");
    assert!(base64_decode("a$bc").is_err());
}
