"""`lakegc://REPO/REF/PATH` URIs and the names inside them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakegc.errors import InvalidArgument, PathEscapesNamespace

SCHEME = "lakegc://"
_REPO_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")
_REF_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,255}$")


@dataclass(frozen=True)
class LakeUri:
    repo: str
    ref: str | None = None
    path: str | None = None

    def __str__(self) -> str:
        return SCHEME + "/".join(p for p in (self.repo, self.ref, self.path) if p is not None)


def parse_uri(text: str, *, need_ref: bool = False, need_path: bool = False, allow_path: bool = True) -> LakeUri:
    """Split a lakegc URI; an empty path (`lakegc://r/main/`) means the root prefix."""
    if not text.startswith(SCHEME):
        raise InvalidArgument(f"invalid URI {text!r}: expected lakegc://REPO[/REF[/PATH]]")
    repo, _, rest = text[len(SCHEME) :].partition("/")
    validate_repo_name(repo, text)
    ref, sep, path = rest.partition("/")
    if not ref:
        if need_ref or need_path:
            raise InvalidArgument(f"invalid URI {text!r}: a ref is missing (lakegc://REPO/REF...)")
        return LakeUri(repo)
    validate_ref_name(ref, text)
    if not sep:
        if need_path:
            raise InvalidArgument(f"invalid URI {text!r}: a path is missing (lakegc://REPO/REF/PATH)")
        return LakeUri(repo, ref)
    if not allow_path and path:
        raise InvalidArgument(f"invalid URI {text!r}: no path expected here")
    if need_path and not path:
        raise InvalidArgument(f"invalid URI {text!r}: a path is missing (lakegc://REPO/REF/PATH)")
    return LakeUri(repo, ref, validate_path(path, allow_prefix=not need_path) if path else "")


def validate_repo_name(name: str, context: str | None = None) -> str:
    if not _REPO_NAME.match(name):
        where = f" in {context!r}" if context else ""
        raise InvalidArgument(f"invalid repository name {name!r}{where}: lowercase letters, digits and '-', 2-63 chars")
    return name


def validate_ref_name(name: str, context: str | None = None) -> str:
    if not _REF_NAME.match(name) or ".." in name:
        where = f" in {context!r}" if context else ""
        raise InvalidArgument(f"invalid ref name {name!r}{where}: letters, digits, '_', '-', '.'")
    return name


def validate_path(path: str, *, allow_prefix: bool = False) -> str:
    """Object paths are relative and never climb: no leading '/', no '.' or '..' parts, no empty parts."""
    if path.startswith("/"):
        raise PathEscapesNamespace(f"invalid path {path!r}: absolute paths are not allowed")
    parts = path.split("/")
    if allow_prefix and parts and parts[-1] == "":
        parts = parts[:-1]
    if any(p in (".", "..") for p in parts):
        raise PathEscapesNamespace(f"invalid path {path!r}: '.' and '..' are not allowed")
    if any(p == "" for p in parts) or "\x00" in path:
        raise InvalidArgument(f"invalid path {path!r}: empty path components are not allowed")
    return path
