"""Checks that run before anything fetched is read.

* digests: :func:`file_digest`, :func:`verify_checksum`, :func:`check_file` (the one comparison
  of a file with its pin that every fetch and loader uses);
* names: :func:`relative_name` and :func:`inside` — a name that comes from a pin or an archive
  (a ``files`` key, a wheel or archive member, a ``.deb`` member) is a relative path that stays
  inside its folder: no ``..``, no absolute path, no symbolic link leading out;
* values handed to external tools (``apt-get download``, ``pip download``, ``dpkg-deb``):
  :func:`debian_spec`, :func:`pip_requirement` — never an option (a package name ``--version``
  is refused), always a well-formed name, and the tools get ``--`` before their positionals;
* pickles: :class:`RestrictedUnpickler` and :func:`restricted_load` build only the classes a
  format needs (the CIFAR-10 batches, Planetoid's adjacency); anything else is refused before
  it is constructed.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import re
import stat
import unicodedata
from collections.abc import Iterable
from pathlib import Path, PurePosixPath, PureWindowsPath

__all__ = [
    "RestrictedUnpickler",
    "check_file",
    "debian_spec",
    "file_digest",
    "inside",
    "is_exact_requirement",
    "forbidden_character",
    "name_character_problem",
    "pip_requirement",
    "relative_name",
    "restricted_load",
    "verify_checksum",
]


def file_digest(path, algorithm: str = "sha256", chunk_size: int = 1 << 20) -> str:
    """Hex digest of a file (``algorithm``: any :mod:`hashlib` name, e.g. sha256, md5), read in
    blocks. Anything but a regular file (a FIFO, a link to ``/dev/zero``) is refused before it is
    opened (``ValueError``): it would block or never end."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{path} is not a regular file (a FIFO, a device or a folder); it is "
                         "not read. Delete it.")
    h = hashlib.new(algorithm)
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(chunk_size), b""):
            h.update(block)
    return h.hexdigest()


def verify_checksum(path, expected: str, algorithm: str = "sha256") -> None:
    """Raise ``ValueError`` unless ``path`` has the hex digest ``expected``."""
    check_file(path, expected, algorithm=algorithm)


def check_file(path, expected: str, *, algorithm: str = "sha256", what: str | None = None,
               hint: str = "") -> str:
    """Compare the ``algorithm`` digest of ``path`` with the pin ``expected``; return it.

    Raises ``ValueError`` on a mismatch: "``what``: checksum mismatch for ``path``: <algorithm>
    is <actual>, expected <pin>. The file is corrupt or not the pinned version.``hint``"
    (``what`` names the asset, ``hint`` says what to do, e.g. which configuration key pins it).
    """
    actual = file_digest(path, algorithm)
    if actual != str(expected).lower():
        prefix = f"{what}: " if what else ""
        raise ValueError(
            f"{prefix}checksum mismatch for {path}: {algorithm} is {actual}, expected "
            f"{expected}. The file is corrupt or not the pinned version.{hint}")
    return actual


# -- names from pins and archives ----------------------------------------------------------------

# The longest file name and path Linux file systems take (NAME_MAX, PATH_MAX of limits.h): a
# longer name from a listing or an archive would only fail later, as a raw OSError.
NAME_MAX = 255
PATH_MAX = 4096


def forbidden_character(text: str) -> tuple[int, str] | None:
    """``(position, character)`` of the first character of ``text`` that no name, path, address
    or other text from outside may hold, or None: control characters (C0, C1, DEL: a newline
    would forge a line of a log or a listing), line and paragraph separators, invisible format
    characters (a zero-width space makes a look-alike of another name), spaces other than the
    plain one, and lone surrogates (bytes that were not UTF-8); Unicode categories Cc, Cf, Zl,
    Zp, Zs (but " ") and Cs. The one rule for names from listings, archives and pins and for
    every text of the pipeline's configuration."""
    for i, char in enumerate(text):
        category = unicodedata.category(char)
        if category in _FORBIDDEN_CATEGORIES and char != " ":
            return i, char
    return None


_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs", "Cs"})


def name_character_problem(name: str) -> str | None:
    """Why ``name`` cannot name a file the pipeline writes, by its characters, completing "the
    name ..."; None when it can (:func:`forbidden_character`)."""
    found = forbidden_character(name)
    if found is None:
        return None
    category = unicodedata.category(found[1])
    if category == "Cs":
        return "is not valid UTF-8"
    kind = "control" if category in ("Cc", "Zl", "Zp") else "invisible"
    return f"holds the {kind} character {ascii(found[1])}"


def relative_name(name, *, what: str) -> str:
    """``name`` as a normalised relative POSIX path (``./a//b`` -> ``a/b``).

    The one rule for every name that comes from outside (a configuration's pin, a hub listing,
    an archive's member). Raises ``ValueError`` naming ``what`` (the pin, listing or archive it
    comes from) when the name is empty, absolute (``/x``, ``C:\\x``), uses backslashes, holds a
    control or invisible character (:func:`name_character_problem`: a newline, an escape, a
    zero-width space) or climbs out with ``..``.
    """
    if not isinstance(name, str) or not name or "\x00" in name or "\\" in name:
        raise ValueError(f"{what}: {name!r} is not a relative path inside its folder.")
    problem = name_character_problem(name)
    if problem:
        raise ValueError(f"{what}: the name {ascii(name)[:200]} {problem}; it is not used.")
    path = PurePosixPath(name)
    parts = [part for part in path.parts if part != "."]
    if path.is_absolute() or PureWindowsPath(name).drive or not parts or ".." in parts:
        raise ValueError(f"{what}: {name!r} is not a relative path inside its folder (no "
                         "absolute path, no '..').")
    too_long = [part for part in parts if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX]
    if too_long or len(name.encode("utf-8", "surrogateescape")) > PATH_MAX:
        raise ValueError(f"{what}: the name {name[:60]!r}... ({len(name)} characters) is longer "
                         f"than a file system allows ({NAME_MAX} bytes a name, {PATH_MAX} a "
                         "path); it is not used.")
    return "/".join(parts)


def inside(root, name, *, what: str) -> Path:
    """``root / name`` after checking that it stays inside ``root``.

    ``name`` must pass :func:`relative_name`, and the path must not lead out of ``root``
    through a symbolic link (of the file or of a folder on the way); ``root`` itself may be a
    link. Raises ``ValueError`` naming ``what``.
    """
    rel = relative_name(name, what=what)
    root = Path(root)
    path = root / rel
    top = root.resolve()
    real = path.resolve()
    if real != top and top not in real.parents:
        raise ValueError(f"{what}: {name!r} leads out of {root} (through a symbolic link to "
                         f"{real}).")
    return path


# -- values that reach external tools ------------------------------------------------------------

# Debian policy §5.6.1 (package names) and §5.6.12 (versions: [epoch:]upstream[-revision], the
# upstream version starting with a digit).
_DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
_DEBIAN_VERSION = re.compile(r"(?:[0-9]+:)?[0-9][A-Za-z0-9.+~-]*")


def debian_spec(package, version, *, what: str) -> str:
    """``package=version`` for ``apt-get download``, both checked against Debian policy.

    Raises ``ValueError`` naming ``what`` for a name or version that is not one (an option
    such as ``--version`` included) or a missing version (an unpinned package).
    """
    if not isinstance(package, str) or not _DEBIAN_PACKAGE.fullmatch(package):
        raise ValueError(f"{what}: {package!r} is not a Debian package name (lower-case letters, "
                         "digits, '+', '-', '.'; it cannot start with '-').")
    if not version:
        raise ValueError(f"{what}: Debian package {package} has no pinned version.")
    if not isinstance(version, str) or not _DEBIAN_VERSION.fullmatch(version):
        raise ValueError(f"{what}: {version!r} is not a Debian version of {package}.")
    return f"{package}={version}"


def pip_requirement(requirement, *, what: str):
    """``requirement`` parsed as a PEP 508 requirement (``name==version``), for ``pip download``.

    Refuses (``ValueError`` naming ``what``) anything pip would read as an option or a location:
    a leading ``-``, a URL or path requirement (``name @ url``), an unparsable string. Returns
    the :class:`packaging.requirements.Requirement`.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    if not isinstance(requirement, str) or requirement.strip().startswith("-"):
        raise ValueError(f"{what}: {requirement!r} is not a package requirement (an option?).")
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement as exc:
        raise ValueError(f"{what}: {requirement!r} is not a package requirement ({exc}).") from None
    if parsed.url:
        raise ValueError(f"{what}: {requirement!r} names a location, not a package version.")
    return parsed


def is_exact_requirement(requirement) -> bool:
    """Whether a parsed requirement pins one version (``name==1.2.3``, no wildcard)."""
    specs = list(requirement.specifier)
    return (len(specs) == 1 and specs[0].operator in ("==", "===")
            and not specs[0].version.endswith(".*"))


# -- pickles -------------------------------------------------------------------------------------

class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds only the ``(module, name)`` pairs in ``allowed``.

    Plain containers, numbers and strings need no class and always load; any other global
    (``os.system``, ``builtins.eval``, a class with a malicious ``__reduce__``) raises
    ``pickle.UnpicklingError`` before it is looked up, let alone called.
    """

    def __init__(self, file, allowed: Iterable[tuple[str, str]], what: str, **kwargs):
        super().__init__(file, **kwargs)
        self.allowed = frozenset(allowed)
        self.what = what

    def find_class(self, module, name):
        if (module, name) in self.allowed:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{self.what}: refusing to load {module}.{name} from a "
                                     "pickle (only plain data is expected there).")


def restricted_load(source, allowed: Iterable[tuple[str, str]] = (), *, what: str,
                    encoding: str = "ASCII"):
    """Unpickle ``source`` (a path, bytes or a binary stream) with :class:`RestrictedUnpickler`."""
    if isinstance(source, (bytes, bytearray)):
        return RestrictedUnpickler(io.BytesIO(source), allowed, what, encoding=encoding).load()
    if isinstance(source, (str, Path)):
        with open(source, "rb") as stream:
            return RestrictedUnpickler(stream, allowed, what, encoding=encoding).load()
    return RestrictedUnpickler(source, allowed, what, encoding=encoding).load()
