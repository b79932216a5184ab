"""Who may use `attncli serve`, and every bad value a clean 4xx: the `Host` allow-list,
the `Origin` check, JSON's content type, the security headers, the token's cookie and
query, text that is not text, deep nesting, clipped names (in-process, over a fake
model); a reserved token and a huge topk:K in a prefix or a sampling (over a real run);
the command's flags, refused before anything loads.
"""

import base64
import hashlib
import html.parser
import json
import time

import pytest
from attncli_process import FIXTURE_RUN
from cli_errors import one_line_error
from fastapi.testclient import TestClient
from fake_server import FakeModel
from typer.testing import CliRunner

from attncli.cli.app import app as cli
from attncli.serve.access import Hosts
from attncli.serve.app import create_app
from attncli.serve.limits import Limits
from attncli.serve.registry import Registry

TOKEN = "s3c+r/t=="
BODY = {"texts": ["ab"]}
PATHS = {"/translate": BODY, "/inspect": {"text": "ab"}, "/step": {"text": "ab", "step": 1}}


def fake_registry():
    """A registry of a fake model (its translation: the text reversed), ready."""
    registry = Registry([("fake", [])], Limits())
    registry.models = {"fake": FakeModel()}
    registry.ready = True
    return registry


def guarded_app(token=None, listening="127.0.0.1", added=()):
    """The application over a fake model, with the `Hosts` of `--host listening --port
    8000 --allow-host ADDED...`."""
    registry = fake_registry()
    return create_app(registry, registry.limits, token=token,
                      hosts=Hosts(listening, added, port=8000))


def served(app):
    """A client of `app` at http://127.0.0.1:8000, answering 500 for a failure."""
    return TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False)


@pytest.fixture
def client():
    with served(guarded_app()) as client:
        yield client


def refused(response, status, fragment):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert fragment in error and "\n" not in error and len(error) < 300, error


# --- Host -----------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "LocalHost:8000",
                                  "[::1]:8000", "[0::1]:8000", "127.0.0.2:8000"])
def test_loopback_names_are_served(client, host):
    assert client.get("/health", headers={"host": host}).status_code == 200
    assert client.post("/translate", json=BODY, headers={"host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io:8000",
                                  "localhost.evil.example", "10.0.0.1:8000"])
def test_another_name_is_421_whatever_the_path(client, host):
    # DNS rebinding: a page of evil.example, its name pointed at 127.0.0.1, reads nothing.
    for path in ("/health", "/models", "/", "/docs", "/nothing"):
        refused(client.get(path, headers={"host": host}), 421, "--allow-host")
    refused(client.post("/translate", json=BODY, headers={"host": host}), 421,
            f"does not answer to the name '{host.rsplit(':', 1)[0] if ':8' in host else host}'")


@pytest.mark.parametrize("host", ["", " ", "a:b", "[::1", "x:80:80", "localhost:99999",
                                  "[::1]8000", ":8000"])
def test_a_host_header_without_a_name_is_400(client, host):
    refused(client.get("/health", headers={"host": host}), 400, "names no host")


def test_allow_host_and_the_host_listened_on_are_served_and_a_wildcard_takes_addresses():
    with served(guarded_app(listening="box.lan", added=["Proxy.example"])) as client:
        for host in ("box.lan:8000", "proxy.example", "proxy.example:1234", "127.0.0.1:8000"):
            assert client.get("/health", headers={"host": host}).status_code == 200, host
        for host in ("box.lan.evil.example", "10.0.0.1:8000", "box.lan:8001"):
            assert client.get("/health", headers={"host": host}).status_code == 421, host
    with served(guarded_app(listening="0.0.0.0")) as client:
        for host in ("10.0.0.1:8000", "[fe80::1]:8000", "localhost:8000"):
            assert client.get("/health", headers={"host": host}).status_code == 200, host
        for host in ("evil.example:8000", "10.0.0.1:9000"):
            assert client.get("/health", headers={"host": host}).status_code == 421, host


@pytest.mark.parametrize("host, named", [
    ("localhost:9000", "names port 9000"), ("127.0.0.1:80", "names port 80"),
    ("[::1]:8001", "names port 8001"), ("localhost", "names none (80 or 443)")])
def test_the_servers_own_names_are_served_on_its_own_port_only(client, host, named):
    # A request for another port of this machine went through a tunnel or a proxy: what
    # that port serves is another origin, which --allow-host NAME:PORT must name.
    refused(client.get("/health", headers={"host": host}), 421,
            f"listens on port 8000, and the Host header {named} (a tunnel or a proxy?); to "
            f"serve it, start it with --allow-host '{host.lower()}'")


def test_allow_host_with_a_port_serves_that_port_only_and_without_one_any():
    with served(guarded_app(added=["localhost:9000", "tunnel.example:443", "Any.Example",
                                   "[::1]:9001"])) as client:
        for host in ("localhost:9000", "tunnel.example", "tunnel.example:443",
                     "any.example:1", "any.example", "[::1]:9001", "localhost:8000"):
            assert client.get("/health", headers={"host": host}).status_code == 200, host
        for host in ("localhost:9001", "tunnel.example:8443", "[::1]:9000"):
            assert client.get("/health", headers={"host": host}).status_code == 421, host


def test_the_address_a_host_name_was_bound_to_is_served():
    # `--host box.lan` prints `serving on http://192.168.1.10:PORT`: that URL must work.
    hosts = Hosts("box.lan", bound="192.168.1.10", port=8000)
    assert hosts.allows("192.168.1.10", 8000) and hosts.allows("box.lan", 8000)
    assert not hosts.allows("192.168.1.11", 8000) and not hosts.allows("192.168.1.10", 8001)
    assert Hosts("fe80::1%eth0", bound="fe80::1%eth0").allows("fe80::1", 8000)


def test_an_application_made_without_hosts_answers_the_loopback_names_only():
    registry = fake_registry()
    app = create_app(registry, registry.limits)
    with TestClient(app, base_url="http://localhost:8123") as client:
        assert client.get("/health").status_code == 200
        for host in ("127.0.0.1:1", "[::1]"):
            assert client.get("/health", headers={"host": host}).status_code == 200, host
        for host in ("testserver", "evil.example:8123", "127.0.0.1.nip.io"):
            refused(client.get("/health", headers={"host": host}), 421, "--allow-host")


def test_an_ipv6_address_is_printed_whole_not_read_as_markup():
    import io

    from rich.console import Console

    from attncli.cli.serve_command import shown_address

    for address, url in (("fe80::1", "[fe80::1]"), ("127.0.0.1", "127.0.0.1")):
        out = io.StringIO()
        Console(file=out, width=200).print(f"http://{shown_address(address)}:8000",
                                           highlight=False)
        assert out.getvalue() == f"http://{url}:8000\n"


# --- Origin and content type ----------------------------------------------------------


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:9999",
                                    "http://localhost:8000", "null", "http://[::1", ""])
def test_a_post_from_another_origin_is_403(client, origin):
    # Another port of 127.0.0.1 is another origin, though its cookies are the server's.
    for path, body in PATHS.items():
        refused(client.post(path, json=body, headers={"origin": origin}), 403,
                "another origin")


def test_the_own_origin_posts_and_reads_from_anywhere_are_served(client):
    own = client.post("/translate", json=BODY, headers={"origin": "http://127.0.0.1:8000"})
    assert own.json()["translations"][0]["text"] == "ba"
    assert client.get("/models", headers={"origin": "http://evil.example"}).status_code == 200
    with served(guarded_app(added=["app.example"])) as added:
        answer = added.post("/translate", json=BODY, headers={"origin": "https://app.example"})
        assert answer.status_code == 200


def test_a_page_of_a_name_added_with_a_port_posts_from_that_port_only():
    with served(guarded_app(added=["app.example:3000", "any.example", "[::1]:3001"])) as client:
        for origin in ("http://app.example:3000", "https://any.example:1234",
                       "http://any.example", "http://[::1]:3001"):
            answer = client.post("/translate", json=BODY, headers={"origin": origin})
            assert answer.status_code == 200, origin
        for origin in ("http://app.example:3001", "http://app.example", "https://app.example",
                       "http://[::1]:3000", "http://app.example:99999"):
            refused(client.post("/translate", json=BODY, headers={"origin": origin}), 403,
                    "another origin")


@pytest.mark.parametrize("content_type", [None, "text/plain", "text/plain;charset=UTF-8",
                                          "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x",
                                          "application/jsonp", "application/json-seq"])
def test_a_json_route_takes_application_json_only(client, content_type):
    # A page may send these to any origin without asking first (a "simple" request).
    headers = {} if content_type is None else {"content-type": content_type}
    for path, body in PATHS.items():
        refused(client.post(path, content=json.dumps(body), headers=headers), 415,
                "Content-Type: application/json")


def test_json_with_its_charset_is_taken(client):
    answer = client.post("/translate", content=json.dumps(BODY),
                         headers={"content-type": "Application/JSON; charset=utf-8"})
    assert answer.json()["translations"][0]["text"] == "ba"


# --- headers --------------------------------------------------------------------------


class Page(html.parser.HTMLParser):
    """The texts of a page's <style> elements and of its <script> elements that run."""

    def __init__(self):
        super().__init__()
        self.texts = {"style": [], "script": []}
        self._open = None

    def handle_starttag(self, tag, attributes):
        if tag in self.texts and not dict(attributes).get("type"):
            self._open = tag
            self.texts[tag].append("")

    def handle_data(self, data):
        if self._open:
            self.texts[self._open][-1] += data

    def handle_endtag(self, tag):
        self._open = None


def policy(response):
    return dict(part.strip().split(" ", 1) for part in
                response.headers["content-security-policy"].split(";"))


def test_every_answer_forbids_framing_and_sniffing(client):
    answers = [client.get("/health"), client.get("/"), client.get("/nothing"),
               client.post("/translate", content="{",
                           headers={"content-type": "application/json"}),
               client.get("/health", headers={"host": "evil.example"})]
    with served(guarded_app(token=TOKEN)) as other:
        answers.append(other.get("/models"))
    for answer in answers:
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert policy(answer)["frame-ancestors"] == "'none'"
    assert [answer.status_code for answer in answers] == [200, 200, 404, 400, 421, 401]


def test_a_failure_of_the_server_is_answered_with_the_headers_too():
    app = guarded_app()
    with served(app) as client:
        app.state.batcher.run = lambda key, texts: 1 / 0
        failed = client.post("/translate", json=BODY)
    assert failed.status_code == 500
    assert failed.headers["x-frame-options"] == "DENY"


def test_the_page_runs_its_own_script_and_style_only(client):
    page = client.get("/")
    parts = Page()
    parts.feed(page.text)
    rules = policy(page)

    def hashes(texts):
        digests = [base64.b64encode(hashlib.sha256(text.encode()).digest()) for text in texts]
        return " ".join(f"'sha256-{digest.decode()}'" for digest in digests)

    assert rules["script-src"] == hashes(parts.texts["script"])
    assert rules["style-src"] == hashes(parts.texts["style"])
    assert len(parts.texts["script"]) == len(parts.texts["style"]) == 1
    assert rules["default-src"] == "'none'" and rules["connect-src"] == "'self'"
    assert "unsafe" not in page.headers["content-security-policy"]


# --- the token ------------------------------------------------------------------------


@pytest.fixture
def with_token():
    with served(guarded_app(token=TOKEN)) as client:
        yield client


def test_other_cookies_as_browsers_send_them_leave_the_token_readable(with_token):
    for cookies in (f"theme=dark mode; attncli_token={TOKEN}",
                    f'a="x y"; attncli_token={TOKEN}; b=c=d+e',
                    f"attncli_token={TOKEN};other=1 2",
                    f"session=a+b=c;attncli_token={TOKEN}"):
        answer = with_token.post("/translate", json=BODY, headers={"cookie": cookies})
        assert answer.status_code == 200, cookies
    wrong = with_token.post("/translate", json=BODY,
                            headers={"cookie": "theme=dark mode; attncli_token=s3c r/t=="})
    assert wrong.status_code == 401


@pytest.mark.parametrize("query", [TOKEN, "s3c%2Br%2Ft%3D%3D"])
def test_a_token_with_a_plus_opens_the_page(with_token, query):
    # Pasted as it is (a `+` stays a `+`: it is no form's space) or percent-encoded.
    assert with_token.get("/?token=s3c r/t==").status_code == 401
    page = with_token.get(f"/?token={query}")
    assert page.status_code == 200
    assert f"attncli_token={TOKEN};" in page.headers["set-cookie"]
    assert with_token.post("/translate", json=BODY).status_code == 200  # the cookie kept


# --- text that is not text, nesting, names ---------------------------------------------

NOT_TEXT = {
    "a lone surrogate in a text": ('{"texts": ["tom \\ud800"]}', "texts[0]", "/translate"),
    "a low surrogate in prefix": ('{"texts": ["a"], "prefix": "\\udfff"}', "prefix",
                                  "/translate"),
    "a lone surrogate in sampling": ('{"texts": ["a"], "sampling": "\\ud800"}', "sampling",
                                     "/translate"),
    "U+FFFF in a text": ('{"texts": ["a", "b \\uffff"]}', "texts[1]", "/translate"),
    "U+FDD0 in model": ('{"texts": ["a"], "model": "\\ufdd0"}', "model", "/translate"),
    "U+10FFFF in prefix": ('{"texts": ["a"], "prefix": "\\udbff\\udfff"}', "prefix",
                           "/translate"),
    "a surrogate in a field's name": ('{"texts": ["a"], "\\ud800": 1}', "body", "/translate"),
    "a surrogate in an unknown field": ('{"texts": ["a"], "x": {"y": ["\\ud800"]}}',
                                        "x.y[0]", "/translate"),
    "a surrogate in reference": ('{"text": "a", "reference": "\\ud800"}', "reference",
                                 "/inspect"),
    "a surrogate in gold": ('{"text": "a", "reference": "b", "gold": "\\ud800"}', "gold",
                            "/inspect"),
    "a surrogate in text": ('{"text": "a \\ud800", "step": 1}', "text", "/step"),
}


@pytest.mark.parametrize("name", NOT_TEXT)
def test_text_that_is_not_text_is_422_wherever_it_is(client, name):
    body, where, path = NOT_TEXT[name]
    answer = client.post(path, content=body, headers={"content-type": "application/json"})
    refused(answer, 422, f"{where}: not valid Unicode")
    # A character that is text is served.
    assert client.post("/translate", json={"texts": ["\U0010fffd"]}).status_code == 200


@pytest.mark.parametrize("body", [
    '{"texts": ["a"], "unknown": ' + "[" * 1000 + "]" * 1000 + "}",
    '{"texts": ' + "[" * 1000 + "]" * 1000 + "}",
    '{"texts": ["a"], "x": ' + '{"a": ' * 1000 + "1" + "}" * 1000 + "}",
    "[" * 100_000,
])
def test_deep_nesting_is_400_even_where_no_field_is(client, body):
    answer = client.post("/translate", content=body, headers={"content-type": "application/json"})
    refused(answer, 400, "at most 32")


def test_nesting_within_the_cap_is_read_and_brackets_in_strings_do_not_count(client):
    body = '{"texts": ["' + "[" * 5000 + '\\""], "x": ' + "[" * 30 + "]" * 30 + "}"
    answer = client.post("/translate", content=body, headers={"content-type": "application/json"})
    refused(answer, 422, "x: unknown field")


def test_a_byte_order_mark_before_the_json_is_ignored(client):
    body = "\ufeff" + json.dumps({"texts": ["abc"]})
    answer = client.post("/translate", content=body.encode("utf-8"),
                         headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text


def test_a_huge_unknown_field_name_is_cut_in_the_error(client):
    answer = client.post("/translate", json={"texts": ["a"], "x" * 900_000: 1})
    refused(answer, 422, "unknown field")
    assert answer.json()["error"].startswith("x" * 79 + "…: unknown field")
    odd = client.post("/translate", json={"texts": ["a"], "a\nb " * 100_000: 1})
    refused(odd, 422, "unknown field")


# --- a real run: reserved tokens in a prefix, topk:K ------------------------------------


@pytest.fixture(scope="module")
def real():
    """The 0.1.0 run (a small trained word-level model) served in-process."""
    registry = Registry([("run", [FIXTURE_RUN / "model"])], Limits())
    app = create_app(registry, registry.limits, load=registry.load)
    with served(app) as client:
        while client.get("/health").status_code != 200:
            time.sleep(0.1)
        yield client


@pytest.mark.parametrize("prefix, written", [
    ("[END]", "[END]"), ("tom [END]", "[END]"), ("tom [end] is", "[END]"),
    ("[START] tom", "[START]"), ("[PAD][END]", "[PAD], [END]"),
])
def test_a_reserved_token_written_in_a_prefix_is_422(real, prefix, written):
    answer = real.post("/translate", json={"texts": ["tom is here."], "prefix": prefix})
    refused(answer, 422, f"writes the reserved token{'s' if ',' in written else ''} "
            f"{written}")


@pytest.mark.parametrize("body, status, fragment", [
    ({"prefix": "\ud800"}, 422, "prefix: not valid Unicode (a lone surrogate"),
    ({"sampling": "topk:" + "9" * 40}, 422, "topk:K needs K <= 2147483647"),
    ({"sampling": "topk:2147483647", "seed": 1}, 200, ""),
])
def test_a_real_model_answers_bad_decoding_values_with_a_4xx(real, body, status, fragment):
    answer = real.post("/translate", content=json.dumps({"texts": ["tom is here."], **body}),
                       headers={"content-type": "application/json"})
    if status == 200:
        assert answer.status_code == 200, answer.text
        return
    refused(answer, status, fragment)
    assert real.post("/translate", json={"texts": ["tom is here."]}).status_code == 200


# --- the command's flags ----------------------------------------------------------------

NUMERIC_LIMITS = ["--max-body-bytes", "--max-texts", "--max-chars", "--max-output-tokens",
                  "--max-beam", "--max-queue", "--batch-tokens"]


@pytest.mark.parametrize("args, fragment", [
    *[([flag, "0"], f"{flag} must be >= 1") for flag in NUMERIC_LIMITS],
    *[([flag, "1e9"], "should be a valid integer") for flag in NUMERIC_LIMITS],
    (["--batch-wait-ms", "inf"], "--batch-wait-ms must be in [0, 1000]"),
    (["--batch-wait-ms", "1e9"], "--batch-wait-ms must be in [0, 1000]"),
    (["--batch-wait-ms", "1000.5"], "--batch-wait-ms must be in [0, 1000]"),
    (["--batch-wait-ms", "nan"], "--batch-wait-ms must be >= 0"),
    (["--batch-wait-ms", "-1"], "--batch-wait-ms must be >= 0"),
    (["--allow-host", "http://evil.example"], "--allow-host 'http://evil.example': give a"),
    (["--allow-host", "box.lan:99999"], "without http://, e.g. --allow-host myhost.lan"),
    (["--allow-host", "box.lan:8000/x"], "or --allow-host myhost.lan:8080 (that port only)"),
    (["--allow-host", ""], "without http://"),
    (["--allow-host", "a b"], "without http://"),
])
def test_serve_refuses_a_flag_out_of_range_in_one_line_before_loading(args, fragment):
    result = CliRunner().invoke(cli, ["serve", str(FIXTURE_RUN), *args], prog_name="attncli")
    assert fragment in one_line_error(result)
