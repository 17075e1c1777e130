"""pylance's ``lance.arrow`` image types: three Arrow extension types and their arrays.

- ``lance.arrow.image_uri`` (:class:`ImageURIType`, a string column of image locations),
- ``lance.arrow.encoded_image`` (:class:`EncodedImageType`, a binary column of PNG/JPEG/... bytes),
- ``lance.arrow.fixed_shape_image_tensor`` (:class:`FixedShapeImageTensorType`, pixels as a
  fixed-size list with the image shape in the type's metadata).

Tables store them as their storage type with the extension name in the field metadata, as
pylance does, so either engine reads the other's image columns. As with ``lance.bfloat16`` (see
:mod:`lance_format.arrow`), importing this module registers nothing with pyarrow: pylance
registers these names at import without checking and would fail after us. The first image type
built here registers all three, unless types of those names are registered already (then those
are the ones pyarrow builds when it reads such a column back).

Decoding and encoding pixels uses Pillow when no decoder/encoder is passed (as pylance does);
Pillow is imported only then.
"""

from __future__ import annotations

import io
import json
import posixpath
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa

from lance_format.errors import ArgumentTypeError, ImageReadError, InvalidInputError, LanceError
from lance_format.io import ObjectStore

IMAGE_URI_NAME = "lance.arrow.image_uri"
ENCODED_IMAGE_NAME = "lance.arrow.encoded_image"
IMAGE_TENSOR_NAME = "lance.arrow.fixed_shape_image_tensor"

_STRING, _BINARY = pa.string(), pa.binary()  # the default storage types, as pylance's
_registered: list[bool] = []


def _register_image_types() -> None:
    """Register the three image types with pyarrow once (keeping any registered before us)."""
    if _registered:
        return
    _registered.append(True)
    for example in (ImageURIType(), EncodedImageType(), FixedShapeImageTensorType(pa.uint8(), (0,))):
        try:
            pa.register_extension_type(example)
        except pa.ArrowKeyError:  # pylance's lance.arrow registered it first: pyarrow keeps that one
            pass


class _ImageType(pa.ExtensionType):
    """Shared behaviour: registration on first use, and pickling by storage type and metadata."""

    def __init__(self, storage_type: pa.DataType, name: str) -> None:
        super().__init__(storage_type, name)
        _register_image_types()

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    def __reduce__(self) -> tuple[Any, ...]:
        # pyarrow < 13 cannot pickle Python extension types by itself
        return type(self).__arrow_ext_deserialize__, (self.storage_type, self.__arrow_ext_serialize__())


class ImageURIType(_ImageType):
    """Image locations (local paths, ``file://``, object-store or ``http(s)://`` URIs) as strings."""

    def __init__(self, storage_type: pa.DataType = _STRING) -> None:
        if not (pa.types.is_string(storage_type) or pa.types.is_large_string(storage_type)):
            raise InvalidInputError("storage_type must be a string type")
        super().__init__(storage_type, IMAGE_URI_NAME)

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> ImageURIType:
        return cls(storage_type)

    def __arrow_ext_class__(self) -> type:
        return ImageURIArray

    def __arrow_ext_scalar_class__(self) -> type:
        return ImageURIScalar


class EncodedImageType(_ImageType):
    """Encoded images (any format Pillow or the caller's decoder reads) as binary values."""

    def __init__(self, storage_type: pa.DataType = _BINARY) -> None:
        if not (pa.types.is_binary(storage_type) or pa.types.is_large_binary(storage_type)):
            raise InvalidInputError("storage_type must be a binary type")
        super().__init__(storage_type, ENCODED_IMAGE_NAME)

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> EncodedImageType:
        return cls(storage_type)

    def __arrow_ext_class__(self) -> type:
        return EncodedImageArray

    def __arrow_ext_scalar_class__(self) -> type:
        return EncodedImageScalar


class FixedShapeImageTensorType(_ImageType):
    """Decoded images of one shape (e.g. height, width, channels): a fixed-size list of pixels."""

    def __init__(self, arrow_type: pa.DataType, shape: Sequence[int]) -> None:
        if len(shape) == 0:
            raise InvalidInputError("an image tensor shape needs at least one dimension")
        self.shape = shape
        self.arrow_type = arrow_type
        super().__init__(pa.list_(arrow_type, int(np.prod(shape))), IMAGE_TENSOR_NAME)

    def __arrow_ext_serialize__(self) -> bytes:
        # pylance's metadata, byte for byte: {"shape": [...]} as json.dumps writes it
        return json.dumps({"shape": list(self.shape) if not isinstance(self.shape, list) else self.shape}).encode()

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> FixedShapeImageTensorType:
        return cls(storage_type.value_type, json.loads(serialized.decode())["shape"])

    def __arrow_ext_class__(self) -> type:
        return FixedShapeImageTensorArray

    def __arrow_ext_scalar_class__(self) -> type:
        return FixedShapeImageTensorScalar


class ImageArray(pa.ExtensionArray):
    """Base of the image arrays; :meth:`from_array` picks the right one for its input."""

    def __repr__(self) -> str:
        return f"<lance.arrow.{type(self).__name__} object at 0x{id(self):016x}>\n{self.to_pylist()!r}"

    @classmethod
    def from_array(cls, images: Any) -> ImageArray:
        """An image array of ``images``: strings become URIs, binaries encoded images,
        fixed-shape tensors image tensors; image arrays are returned as they are; other
        iterables are taken as URIs."""
        if isinstance(images, ImageArray):
            return images
        if isinstance(images, (pa.StringArray, pa.LargeStringArray)):
            return pa.ExtensionArray.from_storage(ImageURIType(images.type), images)  # type: ignore[return-value]
        if isinstance(images, (pa.BinaryArray, pa.LargeBinaryArray)):
            return pa.ExtensionArray.from_storage(EncodedImageType(images.type), images)  # type: ignore[return-value]
        if isinstance(images, pa.FixedShapeTensorArray):
            image_type = FixedShapeImageTensorType(images.type.value_type, images.type.shape)
            return pa.ExtensionArray.from_storage(image_type, images.storage)  # type: ignore[return-value]
        if isinstance(images, pa.Array) or not isinstance(images, Iterable):
            raise ArgumentTypeError(f"Cannot build a ImageArray from {type(images)}")
        return ImageURIArray.from_uris(images)


class ImageURIArray(ImageArray):
    """Image locations; :meth:`read_uris` fetches the encoded images."""

    @classmethod
    def from_uris(cls, uris: pa.StringArray | pa.LargeStringArray | Iterable[str | Path]) -> ImageURIArray:
        """An array of ``uris`` (a string array, or an iterable of strings or paths)."""
        if isinstance(uris, (pa.StringArray, pa.LargeStringArray)):
            storage = uris
        elif isinstance(uris, Iterable) and not isinstance(uris, (str, bytes, pa.Array)):
            storage = pa.array([None if uri is None else str(uri) for uri in uris], type=pa.string())
        else:
            raise ArgumentTypeError(f"Cannot build a ImageURIArray from {type(uris)}")
        return pa.ExtensionArray.from_storage(ImageURIType(storage.type), storage)  # type: ignore[return-value]

    def read_uris(self, storage_type: pa.DataType = _BINARY) -> EncodedImageArray:
        """The images' bytes, read through this engine's stores (local, ``file://``, ``s3://``,
        ``gs://``, ``az://``, ``memory://``) or fetched over ``http(s)://``; nulls stay null.
        ``storage_type=pa.large_binary()`` holds more than 2 GiB. A location that cannot be read
        raises :class:`~lance_format.errors.ImageReadError` naming it."""
        images = [None if uri is None else _read_image_bytes(uri) for uri in self.storage.to_pylist()]
        storage = pa.array(images, type=storage_type)
        return pa.ExtensionArray.from_storage(EncodedImageType(storage_type), storage)  # type: ignore[return-value]


def _read_image_bytes(uri: str) -> bytes:
    scheme = urlparse(uri).scheme
    try:
        if scheme in ("http", "https"):
            from urllib.request import urlopen

            with urlopen(uri) as response:
                return bytes(response.read())
        folder, name = posixpath.split(uri.replace("\\", "/"))
        if scheme == "file" and folder == "file:":  # file://name: a relative local path
            folder = "."
        return ObjectStore(folder or ".").read_bytes(name)
    except (LanceError, OSError) as error:
        reason = error.reason if isinstance(error, LanceError) else str(error)
        raise ImageReadError(f"cannot read the image: {reason}", path=uri) from error


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image


class EncodedImageArray(ImageArray):
    """Encoded images; :meth:`to_tensor` decodes them into pixels."""

    def __repr__(self) -> str:
        image = _pillow()
        first = None if image is None or len(self) == 0 else image.open(io.BytesIO(self.storage[0].as_py()))
        head = f"\n[{first!r}, ..]" if first is not None else "None"
        values = self.to_pylist()
        return f"<lance.arrow.{type(self).__name__} object at 0x{id(self):016x}>{head}\n" + \
            (repr(values[0][:30]) if values and values[0] is not None else "[]")

    def to_tensor(self, decoder: Callable[[pa.Array], Any] | None = None) -> FixedShapeImageTensorArray:
        """The images decoded into one fixed-shape tensor array (all images must share a shape).

        ``decoder`` takes the binary storage array and returns a numpy array of shape
        ``(n, *image_shape)`` or a ``pa.FixedShapeTensorArray``; without it Pillow decodes.
        """
        if decoder is None:
            image = _pillow()
            if image is None:
                raise InvalidInputError("No image decoder available. Please install pillow or pass a decoder argument.")

            def decoder(images: pa.Array) -> np.ndarray:
                return np.stack([np.asarray(image.open(io.BytesIO(data))) for data in images.to_pylist()])

        pixels = decoder(self.storage)
        if isinstance(pixels, pa.FixedShapeTensorArray):
            image_type = FixedShapeImageTensorType(pixels.type.value_type, pixels.type.shape)
            storage = pixels.storage
        else:
            pixels = np.asarray(pixels)
            image_type = FixedShapeImageTensorType(pa.from_numpy_dtype(pixels.dtype), pixels.shape[1:])
            storage = pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(pixels)).storage
        return pa.ExtensionArray.from_storage(image_type, storage)  # type: ignore[return-value]


class FixedShapeImageTensorArray(ImageArray):
    """Decoded images of one shape; :meth:`to_numpy` gives ``(n, *shape)`` pixels."""

    def to_numpy(self, zero_copy_only: bool = False, writable: bool = False) -> np.ndarray:  # type: ignore[override]
        """The pixels as one numpy array of shape ``(n, *image_shape)``."""
        tensor_type = pa.fixed_shape_tensor(self.storage.type.value_type, self.type.shape)
        tensors = pa.ExtensionArray.from_storage(tensor_type, self.storage)
        return tensors.to_numpy_ndarray()  # type: ignore[attr-defined,no-any-return]

    def to_encoded(self, encoder: Callable[[np.ndarray], pa.Array] | None = None,
                   storage_type: pa.DataType = _BINARY) -> EncodedImageArray:
        """The images encoded (PNG through Pillow unless ``encoder`` is given: it takes the
        ``(n, *shape)`` pixels and returns a binary array)."""
        if encoder is None:
            image = _pillow()
            if image is None:
                raise InvalidInputError("No image encoder available. Please install pillow or pass an encoder argument.")

            def encoder(pixels: np.ndarray) -> pa.Array:
                encoded = []
                for one in pixels:
                    with io.BytesIO() as buffer:
                        image.fromarray(one).save(buffer, format="PNG")
                        encoded.append(buffer.getvalue())
                return pa.array(encoded, type=storage_type)

        encoded = encoder(self.to_numpy())
        return pa.ExtensionArray.from_storage(EncodedImageType(storage_type), encoded)  # type: ignore[return-value]


class ImageScalar(pa.ExtensionScalar):
    """One image value; ``as_py`` gives its storage value (a string, bytes or a list of pixels)."""

    def as_py(self, **kwargs: Any) -> Any:  # type: ignore[override]
        return self.value.as_py(**kwargs)  # type: ignore[union-attr]


class ImageURIScalar(ImageScalar):
    """One image location."""


class EncodedImageScalar(ImageScalar):
    """One encoded image."""


class FixedShapeImageTensorScalar(ImageScalar):
    """One decoded image."""


__all__ = [
    "EncodedImageArray", "EncodedImageScalar", "EncodedImageType", "FixedShapeImageTensorArray",
    "FixedShapeImageTensorScalar", "FixedShapeImageTensorType", "ImageArray", "ImageScalar", "ImageURIArray",
    "ImageURIScalar", "ImageURIType",
]
