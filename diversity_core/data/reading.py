"""One line for a data file that cannot be decoded: every reader of this room reads its files
inside :func:`decoding`, which turns what a decoder raises (a bad CRC or deflate stream in a zip
member, a truncated or zeroed pickle, a broken gzip stream, bytes that are not UTF-8, an HTML
page where numbers belong) into an :class:`UnreadableFile`: the file (the archive and its
member), what it should be, what is wrong, and what to do. An error whose message names the
file already (a reader's own, with its line) passes unchanged.
"""

from __future__ import annotations

import csv
import lzma
import pickle
import struct
import zipfile
import zlib
from contextlib import contextmanager

__all__ = ["UnreadableFile", "decoding", "DECODING_ERRORS"]

# What decoders raise on bytes that are not what they should be (OSError: gzip's BadGzipFile, a
# file that cannot be read; ValueError: UnicodeDecodeError, NumPy's conversions).
DECODING_ERRORS = (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError,
                   pickle.UnpicklingError, struct.error, csv.Error, OSError, ValueError,
                   IndexError)
_MAX_REASON = 200


class UnreadableFile(ValueError):
    """A data file that cannot be decoded, said in one line (see the module)."""


@contextmanager
def decoding(path, what: str, remedy: str, *, member: str | None = None):
    """Read ``path`` (``member`` of the archive ``path``) inside this block: a decoding error
    becomes an :class:`UnreadableFile` ``"<path> (member <member>): not a readable <what>
    (<error>); <remedy>"``."""
    try:
        yield
    except UnreadableFile:
        raise
    except DECODING_ERRORS as err:
        if isinstance(err, (ValueError, pickle.UnpicklingError)) and str(path) in str(err):
            raise  # the reader's own message: it names the file
        where = f"{path} (member {member})" if member else f"{path}"
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        if len(reason) > _MAX_REASON:
            reason = reason[:_MAX_REASON] + "…"
        raise UnreadableFile(f"{where}: not a readable {what} ({reason}); {remedy}") from None
