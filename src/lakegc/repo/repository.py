"""The repository API: what the CLI, the Python API and anyone scripting lakegc call.

`Lake` is a metastore and the repositories in it; `Repository` is one of them: its refs and GC
rules here, its objects (`repo.objects`) and its history (`repo.history`) in modules of their own,
mixed into it. These modules validate and compose; the statements they run are the store's
(`repo.store`), the trees they read and write are `repo.trees`', and what GC reads of a repository goes
through `gc_source()`. Every change that could bring back an object a running sweep may delete is
checked against the sweep's fence (`repo.fence`) in the transaction that makes it.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import TYPE_CHECKING

from lakegc.engine.guard import Protected, check_root
from lakegc.errors import AlreadyExists, InvalidArgument, NamespaceError, RefNotFound, RepoNotFound
from lakegc.metastore import Metastore
from lakegc.repo import fence
from lakegc.repo.history import History, new_commit
from lakegc.repo.model import Branch, Commit, RepositoryInfo, Tag
from lakegc.repo.objects import Objects
from lakegc.repo.transactions import of_lake, of_repository
from lakegc.settings import lakegc_home
from lakegc.storage import Storage, normalize_location, open_storage
from lakegc.storage.namespace import claim_namespace, namespace_overlap
from lakegc.timeutil import utcnow
from lakegc.uri import validate_path, validate_ref_name, validate_repo_name

if TYPE_CHECKING:
    from lakegc.repo.gc_source import RepositoryGcSource  # imported when asked for: it loads pyarrow
    from lakegc.repo.trees import TreeStore
    from lakegc.retention.rules import GcRules


class Lake:
    """A metastore and the repositories it holds."""

    def __init__(self, metastore: Metastore | str | None = None):
        self.metastore = metastore if isinstance(metastore, Metastore) else Metastore(metastore)
        self.store = of_lake(self.metastore)

    def create_repository(self, name: str, namespace: str, default_branch: str = "main") -> RepositoryInfo:
        """A repository over an empty namespace (claimed with a marker so no other metastore can
        take it), with its default branch at an initial empty commit."""
        validate_repo_name(name)
        validate_ref_name(default_branch)
        location = normalize_location(namespace)
        check_root(
            location,
            "namespace",
            self.protected_places(repositories=False),
            refusal="use",
            outcome="no repository was created",
        )
        info = RepositoryInfo(name, location, default_branch, utcnow())
        with self.store.write() as lake:
            if lake.repository(name) is not None:
                raise AlreadyExists(f"repository {name!r} already exists")
            overlap = namespace_overlap(
                location, {f"repository {other!r}": ns for other, ns in lake.namespaces().items()}
            )
            if overlap is not None:
                raise NamespaceError(overlap)
            from lakegc.repo.trees import TreeStore

            storage = open_storage(location)
            claim_namespace(storage, name)
            initial = new_commit((), TreeStore(storage).build([]), "Repository created", info.created_at, {})
            lake.insert_repository(info)
            tx = lake.of(name)
            tx.insert_commit(initial, {})
            tx.insert_branch(default_branch, initial.id)
        return info

    def protected_places(self, *, repositories: bool = True, except_repository: str | None = None) -> list[Protected]:
        """What no delete may touch on behalf of this metastore: its database file, lakegc's home
        (connector runs; a root inside it is fine), and every repository's namespace (but
        `except_repository`'s)."""
        places = [Protected("lakegc's home folder", str(lakegc_home().absolute()), inside_ok=True)]
        db = self.metastore.file
        if db is not None:
            places.append(Protected("the lakegc metastore database", db))
        if repositories:
            places += [
                Protected(f"the namespace of repository {r.name!r}", r.storage_namespace)
                for r in self.repositories()
                if r.name != except_repository
            ]
        return places

    def repositories(self) -> list[RepositoryInfo]:
        with self.store.snapshot() as lake:
            return lake.repositories()

    def repository(self, name: str) -> Repository:
        validate_repo_name(name)
        with self.store.snapshot() as lake:
            info = lake.repository(name)
        if info is None:
            raise RepoNotFound(f"repository {name!r} not found")
        return Repository(self, info)

    def delete_repository(self, name: str) -> None:
        """Forgets the repository's metadata; its namespace and data stay where they are."""
        self.repository(name)
        with self.store.write() as lake:
            lake.delete_repository(name)

    def token_secret(self) -> bytes:
        with self.store.write() as lake:
            return lake.token_secret()


class Repository(Objects, History):
    """One repository: refs and GC rules here, its objects (`repo.objects`) and history (`repo.history`)
    mixed in."""

    def __init__(self, lake: Lake, info: RepositoryInfo):
        self.lake = lake
        self.info = info
        self.name = info.name
        self.ms = lake.metastore
        self.store = of_repository(lake.metastore, info.name)
        self.storage: Storage = open_storage(info.storage_namespace)

    @cached_property
    def trees(self) -> TreeStore:
        """The repository's trees (`repo.trees`), loaded with Arrow when a command first reads one."""
        from lakegc.repo.trees import TreeStore

        return TreeStore(self.storage)

    def gc_source(self) -> RepositoryGcSource:
        """What repository GC reads of this repository (`repo.gc_source`)."""
        from lakegc.repo.gc_source import RepositoryGcSource

        return RepositoryGcSource(
            self.name,
            self.info.storage_namespace,
            self.storage,
            self.store,
            self.gc_rules,
            lambda: self.lake.protected_places(except_repository=self.name),
        )

    # -- refs ---------------------------------------------------------------
    def resolve(self, ref: str) -> tuple[Commit, str | None]:
        """The commit a ref names, and the branch name when the ref is a branch."""
        with self.store.snapshot() as tx:
            commit_id, branch = tx.resolve(ref)
            return tx.commit(commit_id), branch

    def branches(self) -> list[Branch]:
        with self.store.snapshot() as tx:
            return tx.branches()

    def create_branch(self, name: str, source: str) -> Branch:
        validate_ref_name(name)
        with self.store.write() as tx:
            tx.refuse_taken_ref_name(name)  # first: "exists" whatever the source (lakeFS's clients rely on it)
            commit_id, _ = tx.resolve(source)
            fence.check(tx, branch=(name, commit_id))
            tx.insert_branch(name, commit_id)
        return Branch(name, commit_id)

    def delete_branch(self, name: str) -> None:
        if name == self.info.default_branch:
            raise InvalidArgument(f"branch {name!r} is the default branch of {self.name!r} and cannot be deleted")
        with self.store.write() as tx:
            tx.branch_head(name)
            tx.delete_branch(name)

    def reset_branch(self, name: str, *, path: str | None = None, prefix: str | None = None) -> int:
        """Drop staged changes of the branch: every one, the one at `path`, or those under
        `prefix`; returns how many there were (none at `path` is no error, as in lakeFS)."""
        if path is not None:
            validate_path(path)
        elif prefix:
            validate_path(prefix, allow_prefix=True)
        with self.store.write() as tx:
            tx.branch_head(name)
            if path is None:
                return tx.clear_staging(name, prefix or "")
            if tx.staged(name, path) is None:
                return 0
            tx.unstage(name, path)
            return 1

    def tags(self) -> list[Tag]:
        with self.store.snapshot() as tx:
            return tx.tags()

    def create_tag(self, name: str, ref: str) -> Tag:
        validate_ref_name(name)
        with self.store.write() as tx:
            commit_id, _ = tx.resolve(ref)
            tx.refuse_taken_ref_name(name)
            fence.check(tx, sources=[commit_id])
            tx.insert_tag(name, commit_id)
        return Tag(name, commit_id)

    def delete_tag(self, name: str) -> None:
        validate_ref_name(name)
        with self.store.write() as tx:
            if not tx.delete_tag(name):
                raise RefNotFound(f"tag {name!r} not found in repository {self.name!r}")

    # -- GC rules -----------------------------------------------------------
    def gc_rules(self) -> GcRules | None:
        """The repository's retention rules (None: none set, GC keeps every commit). Validated on
        the way out too: a row edited by hand gets the same one-line error as `gc set-config`."""
        with self.store.read() as tx:
            doc = tx.gc_rules_doc()
        from lakegc.retention.rules import parse_rules  # pydantic: loaded by the commands that read rules

        return None if doc is None else parse_rules(json.dumps(doc))

    def set_gc_rules(self, rules: GcRules) -> None:
        with self.store.write() as tx:
            fence.check(tx, rules_change=True)
            tx.set_gc_rules_doc(rules.to_doc())

    def delete_gc_rules(self) -> bool:
        """Remove the rules; False when there were none."""
        with self.store.write() as tx:
            fence.check(tx, rules_change=True)
            return tx.delete_gc_rules()


__all__ = ["Lake", "Repository"]
