"""URLs have a policy (issue 57, item 5): where they may lead and what of them is printed.

* Redirects: servers on 127.0.0.1 (Python's http.server) answer 302 to a Location on the same origin (followed and
  read), and to another host name, another port and another scheme (each refused with one line naming both
  addresses, before a byte of the other address is read; from a loopback address, saying so). Generated redirect
  targets (Hypothesis) check `check_redirect` against the rule "same scheme, host and port".
* Secrets: every message goes through `litebert.redact.redact`: generated URLs with user information and
  credential query parameters (token, sig, X-Amz-Signature...) never show the secret, while the host and path stay;
  a failing URL with secrets on the command line prints none of them.
"""

from __future__ import annotations

import contextlib
import http.server
import string
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litebert.cli import main
from litebert.errors import DataError, printable
from litebert.inputs.remote import RedirectRefused, RemotePath, check_redirect
from litebert.redact import redact

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")
BODY = b"the whale swam\nthe ship sailed\n"


@contextlib.contextmanager
def serve(redirects: dict[str, str]):
    """An HTTP server on 127.0.0.1: ``/file.txt`` is BODY; a path in ``redirects`` answers 302 to its value (``{port}``
    filled with the server's own port). Yields (server, base URL); ``server.hits`` counts the requests."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_HEAD(self):
            self.answer(head=True)

        def do_GET(self):
            self.answer(head=False)

        def answer(self, head: bool):
            server.hits.append(self.path)
            path = self.path.split("?", 1)[0]
            if path in redirects:
                self.send_response(302)
                self.send_header("Location", redirects[path].format(port=server.server_port))
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/file.txt":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()
                if not head:
                    self.wfile.write(BODY)
            else:
                self.send_error(404)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.hits = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_redirect_within_the_same_origin_is_followed():
    with serve({"/moved": "/file.txt", "/moved-abs": "http://127.0.0.1:{port}/file.txt"}) as (_, base):
        assert RemotePath(base + "/moved").read_bytes() == BODY
        assert RemotePath(base + "/moved-abs").read_bytes() == BODY


def test_a_redirect_to_another_host_port_or_scheme_is_refused_in_one_line():
    with serve({}) as (other, other_base):
        targets = {"/host": "http://localhost:{port}/file.txt".replace("{port}", str(other.server_port)),
                   "/port": other_base + "/file.txt", "/scheme": "https://127.0.0.1:{port}/file.txt",
                   "/chain": "/host"}
        with serve(targets) as (server, base):
            for path in ("/host", "/port", "/scheme", "/chain"):
                with pytest.raises(RedirectRefused) as e:
                    RemotePath(base + path).read_bytes()
                message = str(e.value)
                assert "\n" not in message and message.startswith(f"{base}"), message
                assert "another scheme, host or port (a loopback or private address: never to another host)" in message
            assert other.hits == []  # the other address was never asked


def test_a_command_reading_a_redirected_url_refuses_it_before_out(albert_vocab, tmp_path, capsys):
    with serve({}) as (other, other_base), serve({"/c.txt": other_base + "/file.txt"}) as (_, base):
        out = tmp_path / "store"
        capsys.readouterr()
        code = main(["data", "prepare", "--input", base + "/c.txt", "--tokenizer", str(albert_vocab),
                     "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith(f"litebert data: error: {base}/c.txt: the server redirects to {other_base}/file.txt"), err
        assert not out.exists() and other.hits == []


hosts = st.sampled_from(["127.0.0.1", "localhost", "10.0.0.2", "example.com", "EXAMPLE.com", "192.168.1.9"])
ports = st.sampled_from([None, 80, 443, 8080])
schemes = st.sampled_from(["http", "https"])


def _url(scheme, host, port, path="/f.txt"):
    return f"{scheme}://{host}{'' if port is None else f':{port}'}{path}"


@settings(max_examples=200, derandomize=True)
@given(schemes, hosts, ports, schemes, hosts, ports)
def test_only_the_same_scheme_host_and_port_are_followed(s1, h1, p1, s2, h2, p2):
    default = {"http": 80, "https": 443}
    same = s1 == s2 and h1.lower() == h2.lower() and (p1 or default[s1]) == (p2 or default[s2])
    try:
        check_redirect(_url(s1, h1, p1), _url(s2, h2, p2, "/g.txt"))
        followed = True
    except RedirectRefused:
        followed = False
    assert followed == same
    check_redirect(_url(s1, h1, p1), "/relative/path")  # a path on the same server is always followed


# ------------------------------------------------------------------------------------------------------ secrets
secret_values = st.text(string.ascii_letters + string.digits + "-_.~%", min_size=6, max_size=24)
secret_params = st.sampled_from(["token", "sig", "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token",
                                 "access_token", "api_key", "X-Goog-Signature", "password"])


@settings(max_examples=200, derandomize=True)
@given(secret=secret_values, param=secret_params, user=st.booleans(), scheme=st.sampled_from(["https", "s3", "hf"]),
       around=st.sampled_from(["{}", "input {} does not exist", "'{}': no such file", "({}),"]))
def test_no_message_shows_a_urls_secrets(secret, param, user, scheme, around):
    url = f"{scheme}://{'alice:' + secret + '@' if user else ''}host.example/data/x.txt?a=1&{param}={secret}&b=2"
    shown = printable(around.format(url))
    assert secret not in shown and "host.example/data/x.txt?a=1&" in shown and "&b=2" in shown, shown
    assert secret not in str(DataError("{input}: bad", input=url)) and secret not in redact(f"Authorization: Bearer "
                                                                                          f"{secret}")


def test_a_failing_url_prints_no_secret(albert_vocab, tmp_path, capsys):
    with serve({}) as (_, base):
        url = (base.replace("http://", "http://bob:hunter2secret@") + "/missing.txt?token=tok_SECRET_1&"
               "X-Amz-Signature=s1g")
        out = tmp_path / "store"
        capsys.readouterr()
        assert main(["data", "prepare", "--input", url, "--tokenizer", str(albert_vocab), "--out", str(out),
                     "--no-progress"]) == 2
        captured = capsys.readouterr()
        printed = captured.out + captured.err
        assert "127.0.0.1" in printed and "missing.txt" in printed and "does not exist" in printed, printed
        for secret in ("hunter2secret", "tok_SECRET_1", "s1g"):
            assert secret not in printed, printed
