"""The user's files, opened and checked before a byte is trusted: embedding files (``.npy``,
``.npz``, ``.csv``; :mod:`.embeddings`, :mod:`.embedding_csv`), raw texts (:mod:`.texts`) and
images (:mod:`.images`), and the one way every file is opened (:mod:`.regular`: regular files
only, never a FIFO or a device). Every refusal is an :class:`InputError` (a ``ValueError``) of
one line naming the file.
"""

from .embeddings import EmbeddingFile, read_embeddings
from .images import image_files, read_image
from .regular import InputError, open_regular
from .texts import read_texts

__all__ = ["EmbeddingFile", "InputError", "image_files", "open_regular", "read_embeddings",
           "read_image", "read_texts"]
