"""Drives the MCP Skills extension of skillhost's MCP front with the official MCP Python
SDK (PyPI `mcp` 2.x) over streamable HTTP.

Usage: mcp_skills.py MODE URL TOKEN SKILL_DIR APPROVED PENDING

MODE is `auto` (`server/discover`, protocol 2026-07-28) or `legacy` (`initialize`). The
SDK has no methods for `skills/list` and `skills/get`: they go through the session's
generic `send_request` with result models written here. Every file of every manifest is
read with `resources/read` and checked against the manifest (hashlib's SHA-256, the size)
and against the file in SKILL_DIR (the approved skill's folder). Prints one JSON line of
facts; any failure exits non-zero with the reason.
"""

import asyncio
import base64
import hashlib
import json
import os
import sys
from typing import Any, Literal

import httpx2
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, ConfigDict, Field

EXTENSION = "io.modelcontextprotocol/skills"


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


class SkillFile(BaseModel):
    uri: str
    digest: str
    size: int


class SkillEntry(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    uri: str
    frontmatter: dict[str, Any]
    resources: list[SkillFile]
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ListSkillsResult(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    skills: list[SkillEntry]
    next_cursor: str | None = Field(default=None, alias="nextCursor")


class GetSkillResult(BaseModel):
    skill: SkillEntry


class ListSkillsRequest(types.PaginatedRequest[Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"


class GetSkillParams(types.RequestParams):
    uri: str


class GetSkillRequest(types.Request[GetSkillParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"
    params: GetSkillParams


async def list_all(session):
    skills, cursor, pages = [], None, 0
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.send_request(ListSkillsRequest(params=params), ListSkillsResult)
        skills.extend(page.skills)
        pages += 1
        check(pages <= 100, "skills/list never ends")
        cursor = page.next_cursor
        if not cursor:
            return skills


async def read_bytes(client, uri):
    result = await client.read_resource(uri)
    check(len(result.contents) == 1, f"{uri}: {len(result.contents)} contents")
    content = result.contents[0]
    if getattr(content, "blob", None) is not None:
        return base64.b64decode(content.blob)
    return content.text.encode("utf-8")


async def main(mode, url, token, skill_dir, approved, pending):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=60) as client:
        capabilities = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
        check(EXTENSION in (capabilities.get("extensions") or {}), f"the extension is not advertised: {capabilities}")
        check("resources" in capabilities, f"skills need the resources capability: {capabilities}")
        session = client.session

        skills = await list_all(session)
        names = [s.frontmatter["name"] for s in skills]
        check(approved in names, f"{approved} not in skills/list: {names}")
        check(pending not in names, f"the pending skill {pending} is listed: {names}")
        check(names == sorted(names) and len(set(names)) == len(names), f"order or duplicates: {names}")

        files = 0
        for skill in skills:
            name = skill.frontmatter["name"]
            check(skill.uri == f"skill://{name}/SKILL.md", f"uri {skill.uri}")
            check(isinstance(skill.frontmatter.get("description"), str), f"{name}: no description: {skill.frontmatter}")
            check(skill.resources and skill.resources[0].uri == skill.uri, f"{name}: SKILL.md is not first: {skill.resources}")
            for entry in skill.resources:
                data = await read_bytes(client, entry.uri)
                digest = "sha256:" + hashlib.sha256(data).hexdigest()
                check(entry.digest == digest, f"{entry.uri}: manifest {entry.digest}, read {digest}")
                check(entry.size == len(data), f"{entry.uri}: manifest {entry.size} bytes, read {len(data)}")
                if name == approved:
                    path = entry.uri.removeprefix(f"skill://{name}/")
                    with open(os.path.join(skill_dir, path), "rb") as f:
                        on_disk = f.read()
                    check(data == on_disk, f"{entry.uri}: the bytes read are not the file's")
                files += 1
            got = await session.send_request(GetSkillRequest(params=GetSkillParams(uri=skill.uri)), GetSkillResult)
            check(got.skill == skill, f"{name}: skills/get differs from skills/list:\n{got.skill}\n{skill}")

        mine = next(s for s in skills if s.frontmatter["name"] == approved)
        manifest = sorted(f.uri.removeprefix(f"skill://{approved}/") for f in mine.resources)
        withheld = [w["path"] for w in ((mine.meta or {}).get("skillhost/withheld") or [])]

        try:
            await session.send_request(GetSkillRequest(params=GetSkillParams(uri=f"skill://{pending}/SKILL.md")), GetSkillResult)
            fail(f"skills/get served the pending skill {pending}")
        except MCPError as e:
            refused_get = str(e)
        check(pending in refused_get and f"skillhost approve {pending}" in refused_get, f"skills/get refusal: {refused_get}")

        refused_reads = {}
        for what, uri in [
            ("pending", f"skill://{pending}/SKILL.md"),
            ("unknown", f"skill://{approved}/references/nope.md"),
            ("dotdot", f"skill://{approved}/../{pending}/SKILL.md"),
        ]:
            try:
                await read_bytes(client, uri)
                fail(f"{uri} was read")
            except MCPError as e:
                refused_reads[what] = str(e)
        print(json.dumps({
            "protocol": client.protocol_version,
            "skills": names,
            "files": files,
            "manifest": manifest,
            "withheld": withheld,
            "refused_get": refused_get,
            "refused_reads": refused_reads,
        }))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
