"""Which proxy a request takes: the environment's variables as curl reads them, a
connection's `proxy:` setting, and a proxy's password never shown."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rungway.config import ConfigError, parse_settings
from rungway.credentials.redaction import redact
from rungway.credentials.secrets import connection_proxy, read_secrets
from rungway.egress import BadProxy, NoProxy, ProxyEnvironment, masked_url, parse_proxy

CORP = "http://corp:3128"


def _chosen(environ: dict[str, str], url: tuple[str, str, int]) -> str | None:
    proxy = ProxyEnvironment.read(environ).choose(*url)
    return None if proxy is None else str(proxy)


def test_each_scheme_takes_its_own_variable_and_all_proxy_fills_in() -> None:
    environ = {"HTTPS_PROXY": "http://secure:1", "ALL_PROXY": "socks5h://any:2"}
    assert _chosen(environ, ("https", "api.example", 443)) == "http://secure:1"
    assert _chosen(environ, ("http", "api.example", 80)) == "socks5h://any:2"
    assert _chosen({}, ("https", "api.example", 443)) is None


def test_the_lower_case_variable_wins_even_when_empty() -> None:
    environ = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2"}
    assert _chosen(environ, ("https", "h", 443)) == "http://lower:2"
    assert (
        _chosen({"HTTPS_PROXY": "http://upper:1", "https_proxy": ""}, ("https", "h", 443)) is None
    )


def test_a_proxy_variable_without_a_scheme_names_an_http_proxy() -> None:
    assert _chosen({"https_proxy": "corp:3128"}, ("https", "h", 443)) == CORP


@pytest.mark.parametrize(
    ("entries", "host", "port", "direct"),
    [
        ("example.com", "example.com", 443, True),
        ("example.com", "api.example.com", 443, True),
        ("example.com", "notexample.com", 443, False),
        (".example.com", "example.com", 443, True),
        (".example.com", "api.example.com", 443, True),
        ("*", "anything.at.all", 443, True),
        ("10.0.0.0/8", "10.1.2.3", 443, True),
        ("10.0.0.0/8", "11.1.2.3", 443, False),
        ("127.0.0.1", "127.0.0.1", 8000, True),
        ("::1", "[::1]", 8000, True),
        ("[::1]:8000", "::1", 8000, True),
        ("example.com:8443", "example.com", 8443, True),
        ("example.com:8443", "example.com", 443, False),
        ("EXAMPLE.com", "Api.Example.COM", 443, True),
        (" a.test , example.com ", "example.com", 443, True),
        ("", "localhost", 443, False),
        ("example.com", "localhost", 443, False),
    ],
)
def test_no_proxy_entries_match_as_curl_matches_them(
    entries: str, host: str, port: int, direct: bool
) -> None:
    environ = {"https_proxy": CORP, "no_proxy": entries}
    assert (_chosen(environ, ("https", host, port)) is None) is direct


def test_loopback_is_not_exempt_without_no_proxy() -> None:
    # As with curl: a proxy variable covers localhost too unless no_proxy names it.
    assert _chosen({"http_proxy": CORP}, ("http", "127.0.0.1", 8000)) == CORP
    assert _chosen({"http_proxy": CORP}, ("http", "localhost", 8000)) == CORP


@given(st.from_regex(r"[a-z]{1,8}(\.[a-z]{1,8}){0,3}", fullmatch=True))
def test_a_host_named_in_no_proxy_and_its_subdomains_go_direct(name: str) -> None:
    bypass = NoProxy(f"other.test,{name}")
    assert bypass.matches(name, 443)
    assert bypass.matches(f"deep.sub.{name}", 443)
    assert not bypass.matches(f"x{name}", 443)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("socks5h://alice:s3cret@10.0.0.1:1080", "socks5h://alice:***@10.0.0.1:1080"),
        ("http://alice@proxy:3128", "http://alice@proxy:3128"),
        ("http://al%40ice:p%3Ass@proxy", "http://al@ice:***@proxy:80"),
        ("socks5://[::1]:9050", "socks5://[::1]:9050"),
    ],
)
def test_a_proxy_prints_without_its_password(url: str, shown: str) -> None:
    proxy = parse_proxy(url)
    assert str(proxy) == shown
    assert repr(proxy) == f"Proxy({shown})"
    assert "s3cret" not in proxy.identity


def test_credentials_in_a_proxy_url_are_decoded() -> None:
    proxy = parse_proxy("http://al%40ice:p%3Ass@proxy:8080")
    assert (proxy.username, proxy.password) == ("al@ice", "p:ss")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://u:s3cret@h:1", "the scheme must be one of http, socks5, socks5h"),
        ("https://u:s3cret@h:1", "a proxy reached over TLS is not supported"),
        ("http://u:s3cret@h:99999", "is not a proxy URL"),
        ("http://u:s3cret@h:1/path", "scheme://[user:password@]host:port alone"),
        ("http://u:s3cret@:1", "names no host"),
    ],
)
def test_a_bad_proxy_url_says_why_without_its_password(url: str, problem: str) -> None:
    with pytest.raises(BadProxy) as raised:
        parse_proxy(url)
    assert problem in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_a_bad_proxy_variable_is_named() -> None:
    with pytest.raises(BadProxy, match="the environment's all_proxy: ftp://u:\\*\\*\\*@h:1"):
        ProxyEnvironment.read({"ALL_PROXY": "ftp://u:s3cret@h:1"})


def _connection(proxy: str | dict[str, str]) -> dict[str, object]:
    return {"id": "c", "provider": "openai", "auth": "none", "models": ["m"], "proxy": proxy}


def test_a_connection_proxy_is_checked_when_the_config_loads() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_settings({"connections": [_connection("socks4://u:s3cret@h:1")]})
    message = str(raised.value)
    assert "connections[0].proxy: socks4://u:***@h:1: the scheme must be one of" in message
    assert "s3cret" not in message


def test_a_proxy_url_may_be_read_from_the_environment_and_is_checked_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = parse_settings({"connections": [_connection({"env": "RW_TEST_PROXY"})]})
    monkeypatch.setenv("RW_TEST_PROXY", "socks5h://u:s3cret@h:1080")
    assert connection_proxy("c", read_secrets(settings)) == "socks5h://u:s3cret@h:1080"
    monkeypatch.setenv("RW_TEST_PROXY", "socks4://u:s3cret@h:1080")
    with pytest.raises(ConfigError) as raised:
        read_secrets(settings)
    assert "connections[0].proxy: socks4://u:***@h:1080: the scheme must be" in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_a_bad_proxy_variable_stops_the_gateway_with_the_configs_problems(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "ftp://u:s3cret@h:1")
    settings = parse_settings({"connections": [_connection("direct")]})
    with pytest.raises(ConfigError) as raised:
        read_secrets(settings, source="rungway.yaml")
    assert str(raised.value) == (
        "rungway.yaml: cannot read credentials\n  the environment's https_proxy: "
        "ftp://u:***@h:1: the scheme must be one of http, socks5, socks5h"
    )


def test_a_proxy_url_is_not_read_from_the_credential_store() -> None:
    with pytest.raises(ConfigError, match="read from `env` or `file`, not the store"):
        parse_settings({"connections": [_connection({"store": "some-login"})]})


@pytest.mark.parametrize("value", ["direct", "none", " Direct "])
def test_direct_and_none_mean_no_proxy(value: str) -> None:
    settings = parse_settings({"connections": [_connection(value)]})
    assert settings.connections[0].proxy == "direct"


def test_a_url_with_a_password_is_masked_in_any_text() -> None:
    text = "cannot connect to socks5h://alice:s3cret-long@10.0.0.1:1080 (refused)"
    assert redact(text) == "cannot connect to socks5h://[redacted]@10.0.0.1:1080 (refused)"
    assert masked_url("redis://:s3cret@h:6379/0") == "redis://:***@h:6379/0"
    # A proxy already shown masked keeps its user name.
    assert (
        redact("the proxy http://alice:***@h:1 refused") == "the proxy http://alice:***@h:1 refused"
    )


_PASSWORDS = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ!$&+,;=~@:/%éß", min_size=8, max_size=40)


@given(_PASSWORDS, st.sampled_from(["http", "socks5", "socks5h", "ftp", "https"]))
def test_no_proxy_text_the_gateway_makes_holds_the_password(password: str, scheme: str) -> None:
    url = f"{scheme}://alice:{quote(password, safe='')}@proxy.example:3128"
    try:
        proxy = parse_proxy(url)
    except BadProxy as error:
        shown = [str(error)]
    else:
        assert proxy.password == password
        shown = [str(proxy), repr(proxy), proxy.identity]
    shown.append(masked_url(url))
    for text in shown:
        assert password not in text
        assert quote(password, safe="") not in text
