"""Tests of site-check that need no network: `skillhost test site-check` runs them in
the sandbox, then checks the MCP handshake."""
from server import summarize

PAGE = """<html><head><title> Status </title></head><body>
<h1>All systems go</h1><h2>API</h2>
<a href="/a">a</a><a href="b#top">b</a><a href="/a">again</a>
<a href="https://other.example/x">elsewhere</a><a href="mailto:x@y">mail</a>
</body></html>"""


def test_title_and_headings():
    page = summarize(PAGE, "https://status.example.com/index.html")
    assert page["title"] == "Status"
    assert page["headings"] == ["All systems go", "API"]


def test_links_stay_on_the_site_once_each():
    page = summarize(PAGE, "https://status.example.com/index.html")
    assert page["links"] == ["https://status.example.com/a", "https://status.example.com/b"]


def test_no_title():
    assert summarize("<p>x</p>", "https://a.example/")["title"] is None
