#!/usr/bin/env python3
"""site-check: is a web page up, how fast, what is it called, which links are broken.

A FastMCP skill for skillhost. It reaches the network only through the host's egress
proxy (HTTP(S)_PROXY, set by the sandbox), so only the hosts in skill.toml's
`[network] allow` answer.
"""
import time
from urllib.parse import urljoin, urlparse

import httpx
from bs4 import BeautifulSoup
from fastmcp import FastMCP

mcp = FastMCP("site-check")


def summarize(html: str, base_url: str) -> dict:
    """The title, headings and same-site links of an HTML page."""
    soup = BeautifulSoup(html, "lxml")
    title = soup.title.string.strip() if soup.title and soup.title.string else None
    headings = [h.get_text(" ", strip=True) for h in soup.find_all(["h1", "h2"])][:10]
    host = urlparse(base_url).netloc
    links = []
    for a in soup.find_all("a", href=True):
        url = urljoin(base_url, a["href"]).split("#")[0]
        if urlparse(url).scheme in ("http", "https") and urlparse(url).netloc == host and url not in links:
            links.append(url)
    return {"title": title, "headings": headings, "links": links}


@mcp.tool(annotations={"readOnlyHint": True, "openWorldHint": True})
async def check_site(url: str) -> dict:
    """Check that a web page is up: HTTP status, response time, title and headings."""
    start = time.monotonic()
    try:
        async with httpx.AsyncClient(timeout=10, follow_redirects=True) as client:
            response = await client.get(url)
    except httpx.HTTPError as e:
        return {"url": url, "up": False, "error": f"{type(e).__name__}: {e}"}
    elapsed = round(time.monotonic() - start, 3)
    page = summarize(response.text, str(response.url)) if "html" in response.headers.get("content-type", "") else {}
    return {
        "url": url,
        "up": response.status_code < 400,
        "status": response.status_code,
        "response_time_seconds": elapsed,
        "title": page.get("title"),
        "headings": page.get("headings", []),
    }


@mcp.tool(annotations={"readOnlyHint": True, "openWorldHint": True})
async def broken_links(url: str, limit: int = 20) -> dict:
    """Find links on a page (same site only, at most `limit`) that do not answer with success."""
    async with httpx.AsyncClient(timeout=10, follow_redirects=True) as client:
        response = await client.get(url)
        links = summarize(response.text, str(response.url))["links"][: max(0, min(limit, 100))]
        broken = []
        for link in links:
            try:
                status = (await client.head(link)).status_code
            except httpx.HTTPError as e:
                broken.append({"url": link, "error": type(e).__name__})
                continue
            if status >= 400:
                broken.append({"url": link, "status": status})
    return {"url": url, "checked": len(links), "broken": broken}


if __name__ == "__main__":
    mcp.run(transport="stdio", show_banner=False)
