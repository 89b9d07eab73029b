"""Anonymization: user names and path prefixes replaced in every string the report shows.

An :class:`Anonymizer` is a function ``str -> str``. The report applies it to everything it
prints (Jinja's ``finalize`` hook, so no template expression escapes it) and to every text
drawn in a figure. What it hides is collected from the runs themselves:

- user names: the current user, ``$USER``/``$LOGNAME``, and the ``<name>`` of any
  ``/home/<name>``, ``/Users/<name>``, ``/u/<name>`` path seen -> ``user``;
- home directories of those users -> ``~``;
- directories the manifests name (repository, results, dataset, run directory) -> ``<repo>``,
  ``<results>``, ``<data>``, ``<run>``;
- the common directory of each file class's files in a run (at least two levels deep, so
  ``/tmp`` stays) -> ``<dataset>``, ``<checkpoint>``, ...; then, for the files left, the
  common directory under each top-level directory that is not a system one -> ``<prefix>``.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iosweep.report.data import RunView

# Accounts that identify no person; replacing "root" would also garble --allow-run-as-root.
_GENERIC_USERS = {"root", "nobody", "user", "daemon"}
_HOME_RE = re.compile(r"/(?:home|Users|users|u|homes)/([A-Za-z0-9_][A-Za-z0-9._-]*)")
_SYSTEM_TOPS = {"tmp", "dev", "proc", "sys", "usr", "lib", "lib64", "etc", "var", "opt", "bin"}
_WORD = r"A-Za-z0-9_"


class Anonymizer:
    """Replace ``prefixes`` (directory -> token) and whole-word ``users`` in strings."""

    def __init__(self, users: Iterable[str] = (), prefixes: dict[str, str] | None = None):
        self.users = sorted(
            {u for u in users if u and u not in _GENERIC_USERS}, key=len, reverse=True
        )
        prefixes = {p.rstrip("/"): t for p, t in (prefixes or {}).items() if p and p.rstrip("/")}
        self.prefixes = dict(sorted(prefixes.items(), key=lambda kv: len(kv[0]), reverse=True))
        self._prefix_re = (
            re.compile(
                "|".join(f"(?:{re.escape(p)})(?=[/\\s'\":;,=)\\]}}]|$)" for p in self.prefixes)
            )
            if self.prefixes
            else None
        )
        self._user_re = (
            re.compile(f"(?<![{_WORD}])(?:{'|'.join(map(re.escape, self.users))})(?![{_WORD}])")
            if self.users
            else None
        )

    @property
    def enabled(self) -> bool:
        return bool(self._prefix_re or self._user_re)

    def __call__(self, s: str) -> str:
        if not isinstance(s, str) or not s:
            return s
        if self._prefix_re is not None:
            s = self._prefix_re.sub(lambda m: self.prefixes[m.group(0)], s)
        if self._user_re is not None:
            s = self._user_re.sub("user", s)
        return s

    def hides(self) -> dict[str, list[str]]:
        """What is hidden (for the log, never for the report)."""
        return {"users": list(self.users), "prefixes": list(self.prefixes)}


def identity(s: str) -> str:
    return s


def _users_in(text: str) -> set[str]:
    return set(_HOME_RE.findall(text))


def _common_dir(paths: Iterable[str]) -> str | None:
    """Deepest directory holding every path, if at least two levels deep and not a system dir."""
    dirs = [os.path.dirname(p) for p in paths if p.startswith("/")]
    if not dirs:
        return None
    common = os.path.commonpath(dirs)
    parts = Path(common).parts  # ('/', 'scratch', 'x')
    if len(parts) < 3 or parts[1] in _SYSTEM_TOPS:
        return None
    return common


def _token(name: str) -> str:
    return "<" + re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ">"


def _run_dir_from_command(command: list[str]) -> str | None:
    for i, a in enumerate(command):
        if a == "--run-dir" and i + 1 < len(command):
            return command[i + 1]
        if a.startswith("--run-dir="):
            return a.split("=", 1)[1]
    return None


def _workload_prefixes(workload, prefixes: dict[str, str]) -> None:
    """A user's workload: its work folder, and the environment its interpreter lives in."""
    if not isinstance(workload, dict) or workload.get("builtin"):
        return
    if isinstance(workload.get("workdir"), str) and workload["workdir"]:
        prefixes.setdefault(workload["workdir"], "<workdir>")
    py = workload.get("python")
    if isinstance(py, str) and py.startswith("/"):
        env = str(Path(py).parent.parent)  # .../venv/bin/python -> .../venv
        parts = Path(env).parts
        if len(parts) >= 3 and parts[1] not in _SYSTEM_TOPS:
            prefixes.setdefault(env, "<python-env>")


def build_anonymizer(
    runs: Iterable[RunView],
    config: dict | None = None,
    extra_texts: Iterable[str] = (),
) -> Anonymizer:
    """An anonymizer for these runs (``iosweep.report.data.RunView``s) and config."""
    users: set[str] = set()
    for get in (
        getpass.getuser,
        lambda: os.environ.get("USER", ""),
        lambda: os.environ.get("LOGNAME", ""),
    ):
        with contextlib.suppress(OSError, KeyError):  # no passwd entry (containers)
            users.add(get())
    prefixes: dict[str, str] = {}
    texts: list[str] = list(extra_texts)
    all_paths: list[str] = []
    repo = Path(__file__).resolve().parents[3]
    if (repo / "Snakefile").exists():  # a source checkout, not site-packages
        prefixes[str(repo)] = "<repo>"
    if config and isinstance(config.get("results"), str):
        res = config["results"]
        prefixes[str((repo / res).resolve()) if not os.path.isabs(res) else res] = "<results>"
    for run in runs:
        meta = run.meta
        texts.append(run.summary.store)
        man = meta.manifest or {}
        if isinstance(man.get("dataset"), str) and man["dataset"]:
            prefixes.setdefault(man["dataset"], "<data>")
        rd = _run_dir_from_command(list(meta.command or []))
        if rd:
            prefixes.setdefault(rd, "<run>")
        texts.extend(str(a) for a in meta.command or [])
        _workload_prefixes(man.get("workload"), prefixes)
        texts.extend(str(v) for v in (man.get("tracer") or {}).values() if isinstance(v, str))
        for cls, paths in run.paths_by_class().items():
            texts.extend(paths[:1000])
            all_paths.extend(paths)
            common = _common_dir(paths)
            if common:
                prefixes.setdefault(common, _token(cls))
    # What the classes leave: the site's own directory trees, one prefix per top directory.
    tops: dict[str, list[str]] = {}
    for p in all_paths:
        parts = p.split("/")
        if p.startswith("/") and len(parts) > 2 and parts[1] not in _SYSTEM_TOPS:
            tops.setdefault(parts[1], []).append(p)
    for i, (_top, paths) in enumerate(sorted(tops.items())):
        common = _common_dir(paths)
        if common and common not in prefixes:
            prefixes[common] = "<prefix>" if i == 0 else f"<prefix{i + 1}>"
    for t in texts:
        users |= _users_in(t)
    users -= _GENERIC_USERS
    for u in users:
        for top in ("home", "Users", "users", "u", "homes"):
            prefixes[f"/{top}/{u}"] = "~"
    home = os.path.expanduser("~")
    if home not in ("", "/", "/root"):
        prefixes[home] = "~"
    return Anonymizer(users, prefixes)
