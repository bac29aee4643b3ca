"""The install does not drift: requirements/lock.txt pins every package that
pyproject.toml asks for (the base install and the test extra, with the extras
it pulls), each at a version its specifier accepts; torch is pinned by the
Makefile's TORCH, not the lock."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support import ROOT


def locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and re.fullmatch(r"[\w.+!-]+", version), f"not an exact pin: {line}"
        pins[canonicalize_name(name)] = version
    return pins


def required(extra: str = "test") -> list[Requirement]:
    """pyproject's base dependencies and `extra`'s, self-references expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    reqs, todo, seen = [Requirement(r) for r in project["dependencies"]], [extra], set()
    while todo:
        name = todo.pop()
        seen.add(name)
        for text in extras[name]:
            req = Requirement(text)
            if canonicalize_name(req.name) == canonicalize_name(project["name"]):
                todo += [e for e in req.extras if e not in seen]
            else:
                reqs.append(req)
    return reqs


def test_the_lock_pins_every_requirement_at_an_accepted_version():
    pins = locked()
    for req in required():
        name = canonicalize_name(req.name)
        if name == "torch":
            continue
        assert name in pins, f"{req.name} is required but not in requirements/lock.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{req.name}=={pins[name]} in the lock does not satisfy {req}")


def test_torch_is_pinned_by_the_makefile_not_the_lock():
    assert "torch" not in locked()
    makefile = (ROOT / "Makefile").read_text()
    default = re.search(r"^DEFAULT_TORCH := torch==([\w.]+)$", makefile, re.M)
    assert default, "the Makefile pins torch's version"
    torch_req = next(r for r in required() if r.name == "torch")
    assert torch_req.specifier.contains(default.group(1))
    assert "-r requirements/lock.txt" in makefile
