"""Image files of the user's: PNG and JPEG, one file or a folder of them, decoded by Pillow.

In a folder, an entry named ``*.png``/``*.jpg``/``*.jpeg`` that is a FIFO, a device, a socket or
a link to nothing is refused, naming it (never opened: a FIFO would wait for a writer forever);
subfolders are not read. Every file is opened non-blocking and checked to be a regular file
before it is read. An image of more pixels than Pillow's decompression-bomb limit
(``PIL.Image.MAX_IMAGE_PIXELS``) is refused from its header before a pixel is decoded.
"""

from __future__ import annotations

import os
import re
import stat
import warnings
from pathlib import Path

import numpy as np

from .regular import InputError, file_kind, open_regular

__all__ = ["IMAGE_SUFFIXES", "image_files", "read_image"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def image_file_problem(path: Path) -> str | None:
    """Why ``path`` is not a regular file (None when it is), found by ``stat``, which never
    opens it (links followed)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return ("a symbolic link to a missing file" if path.is_symlink() else "no such file")
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    return file_kind(mode)


def image_files(folder) -> list[Path]:
    """The PNG and JPEG files of ``folder`` (not its subfolders), sorted by name.

    An entry named as an image that is not a regular file (a FIFO, a device, a socket, a link
    to nothing) is refused with ``ValueError`` naming it rather than skipped: it is never opened,
    and the set is not silently smaller than the folder says."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder of images.")
    files = []
    for p in sorted(folder.iterdir()):
        if p.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        problem = image_file_problem(p)
        if problem == "a folder":
            continue  # subfolders are not read
        if problem is not None:
            raise ValueError(f"{p} is {problem}, not an image file; an image folder holds "
                             "PNG and JPEG files.")
        files.append(p)
    if not files:
        raise ValueError(f"{folder}: no image in it (.png, .jpg, .jpeg).")
    return files


def read_image(path) -> np.ndarray:
    """The image file ``path`` as an (H, W, 3) uint8 RGB array (Pillow); ``ValueError`` naming
    the file if it is not a regular file, not an image Pillow can decode, or an image of more
    pixels than ``PIL.Image.MAX_IMAGE_PIXELS`` (judged from its header, before decoding)."""
    from PIL import Image, UnidentifiedImageError

    limit = Image.MAX_IMAGE_PIXELS
    try:
        with open_regular(path, expected="a PNG or JPEG file") as stream, \
                warnings.catch_warnings():
            # Pillow only warns between its limit and twice it, and decodes anyway: 144
            # million pixels (1.7 GB on the way to RGB) from a 17 KB PNG. An error here, raised
            # by Image.open from the header.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(stream) as image:
                width, height = image.size
                if limit is not None and width * height > limit:  # should Pillow not check
                    raise Image.DecompressionBombError(f"({width * height} pixels)")
                image.load()
                if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P"
                                                          and "transparency" in image.info):
                    background = Image.new("RGBA", image.size, (255, 255, 255, 255))
                    image = Image.alpha_composite(background, image.convert("RGBA"))
                array = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as err:
        found = re.search(r"\((\d+) pixels\)", str(err))  # Pillow's wording, and ours above
        pixels = f"{int(found.group(1)):,} pixels" if found else "too many pixels"
        raise ValueError(f"{path}: an image of {pixels}, more than PIL.Image.MAX_IMAGE_PIXELS "
                         f"({limit:,}); refused before it is decoded.") from None
    except InputError:
        raise
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise ValueError(f"{path}: not an image that can be read ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else 'no detail'}).") from None
    if array.ndim != 3 or array.shape[2] != 3 or min(array.shape[:2]) < 1:
        raise ValueError(f"{path}: an image of shape {array.shape} cannot be embedded.")
    return array
