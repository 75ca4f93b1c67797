#!/usr/bin/env python3
"""A real SMTP server for the email channel's tests (tests/it/email.rs), on aiosmtpd.

Listens on 127.0.0.1:PORT in one of three modes:
  starttls  plain at first, STARTTLS offered and required before anything else, AUTH required
  implicit  TLS from the first byte, AUTH required
  plain     no TLS at all, AUTH offered (what a client that must not log in in the clear meets)

Every message taken is written to OUT/mail-N.json: the envelope, whether it came over TLS, who
logged in, and the message as received. Every login tried adds its user name (never the password)
and whether it matched to OUT/logins. Runs until killed; OUT/ready appears once it listens.

Usage: smtp_sink.py MODE PORT OUT CERT KEY USER PASSWORD
"""

import json
import logging
import os
import signal
import ssl
import sys
import warnings

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


def main():
    # aiosmtpd warns of AUTH without required TLS (implicit mode: it is TLS from the first byte)
    # and of its own deprecations; neither is news to these tests.
    warnings.simplefilter("ignore")
    logging.getLogger("mail.log").setLevel(logging.ERROR)
    mode, port, out, cert, key, user, password = sys.argv[1:8]
    port = int(port)
    count = 0

    def authenticate(server, session, envelope, mechanism, auth_data):
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        ok = auth_data.login.decode() == user and auth_data.password.decode() == password
        with open(os.path.join(out, "logins"), "a") as f:
            f.write(f"{auth_data.login.decode()} {'ok' if ok else 'refused'}\n")
        # handled=False: aiosmtpd answers a refusal itself (535) only when told it is not handled.
        return AuthResult(success=ok, handled=False)

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            nonlocal count
            count += 1
            doc = {
                "mail_from": envelope.mail_from,
                "rcpt_tos": envelope.rcpt_tos,
                # STARTTLS sets session.ssl; a connection that was TLS from the start has an
                # SSL object on its transport.
                "tls": session.ssl is not None
                or server.transport.get_extra_info("ssl_object") is not None,
                "login": user if session.authenticated else None,
                "data": envelope.content.decode("utf-8", "replace"),
            }
            path = os.path.join(out, f"mail-{count}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(doc, f)
            os.rename(path + ".tmp", path)
            return "250 2.0.0 queued as sink-%d" % count

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    kwargs = dict(
        authenticator=authenticate,
        auth_required=mode != "plain",
        # Over STARTTLS, AUTH is offered only once TLS is up. (aiosmtpd offers none at all on an
        # implicit TLS connection when asked to require TLS: it knows TLS only by STARTTLS.)
        auth_require_tls=mode == "starttls",
        ready_timeout=20,
    )
    if mode == "starttls":
        kwargs.update(tls_context=context, require_starttls=True)
    elif mode == "implicit":
        kwargs.update(ssl_context=context)
    elif mode != "plain":
        sys.exit(f"smtp_sink.py: unknown mode {mode!r}")
    # Blocked before the server's threads start, so the wait below is the one that takes them.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    controller = Controller(Handler(), hostname="127.0.0.1", port=port, **kwargs)
    controller.start()
    open(os.path.join(out, "ready"), "w").close()
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    controller.stop()


if __name__ == "__main__":
    main()
