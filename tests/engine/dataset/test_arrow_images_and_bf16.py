"""pylance's ``lance.arrow`` image types and bfloat16 arrays, called the same way on both engines.

pylance registers its extension types when ``lance.arrow`` is imported and fails if a type of
the same name is registered already, so this module imports it first; ours then leaves pylance's
registered types in place. What ours does alone (it registers its own on first use) runs in a
fresh interpreter.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import lance
import lance.arrow  # noqa: F401 - pylance registers its image and bfloat16 types now, before ours
import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

import lance_format
import lance_format.arrow as ours
from lance_format.errors import ArgumentTypeError, ImageReadError, InvalidInputError

theirs = sys.modules["lance.arrow"]
ENGINES = (lance, lance_format)


@pytest.fixture
def pngs(tmp_path: Path) -> list[str]:
    """Three small RGBA PNGs of one shape, with different pixels."""
    paths = []
    for i in range(3):
        pixels = np.full((2, 3, 4), 40 * i, dtype=np.uint8)
        pixels[0, 0] = [i, 255 - i, 7, 255]
        path = tmp_path / f"img{i}.png"
        Image.fromarray(pixels).save(path)
        paths.append(str(path))
    return paths


def _both(call):
    """``call(module)`` on our ``lance.arrow`` and on pylance's."""
    return call(ours), call(theirs)


def test_image_types_have_pylance_names_storage_and_metadata():
    for make in (lambda m: m.ImageURIType(), lambda m: m.ImageURIType(pa.large_string()),
                 lambda m: m.EncodedImageType(), lambda m: m.EncodedImageType(pa.large_binary()),
                 lambda m: m.FixedShapeImageTensorType(pa.uint8(), (2, 3, 4)),
                 lambda m: m.FixedShapeImageTensorType(pa.float32(), [5])):
        a, b = _both(make)
        assert (a.extension_name, a.storage_type) == (b.extension_name, b.storage_type)
        assert a.__arrow_ext_serialize__() == b.__arrow_ext_serialize__()
    for module in (ours, theirs):
        with pytest.raises(ValueError, match="string type"):
            module.ImageURIType(pa.binary())
        with pytest.raises(ValueError, match="binary type"):
            module.EncodedImageType(pa.string())


def test_read_uris_and_from_array_like_pylance(pngs):
    uris = pngs + ["file://" + pngs[0]]
    ours_uris, their_uris = _both(lambda m: m.ImageURIArray.from_uris(uris))
    assert ours_uris.to_pylist() == their_uris.to_pylist() == uris
    assert ours.ImageURIArray.from_uris(pa.array(uris, pa.large_string())).type.storage_type == pa.large_string()
    assert ours.ImageURIArray.from_uris([Path(p) for p in pngs]).to_pylist() == pngs
    ours_bytes, their_bytes = ours_uris.read_uris(), their_uris.read_uris()
    assert type(ours_bytes).__name__ == "EncodedImageArray"
    assert ours_bytes.storage.equals(their_bytes.storage)
    assert ours_uris.read_uris(pa.large_binary()).storage.type == pa.large_binary()
    # from_array picks the array kind from the input, as pylance's does
    for storage in (pa.array(uris), pa.array(uris, pa.large_string()), ours_bytes.storage,
                    ours_bytes.storage.cast(pa.large_binary())):
        a, b = _both(lambda m, storage=storage: m.ImageArray.from_array(storage))
        assert (type(a).__name__, a.type.extension_name) == (type(b).__name__, b.type.extension_name)
        assert a.storage.equals(b.storage)
    assert ours.ImageArray.from_array(ours_bytes) is ours_bytes
    assert ours.ImageArray.from_array(uris).to_pylist() == uris
    with pytest.raises(TypeError):
        ours.ImageArray.from_array(pa.array([1, 2]))
    with pytest.raises(ArgumentTypeError):
        ours.ImageURIArray.from_uris(42)  # type: ignore[arg-type]


def test_read_uris_of_a_missing_image_names_it(tmp_path, pngs):
    missing = str(tmp_path / "nope.png")
    with pytest.raises(ImageReadError, match="nope.png") as caught:
        ours.ImageURIArray.from_uris([pngs[0], missing]).read_uris()
    assert isinstance(caught.value, OSError)


def test_read_uris_through_the_engines_stores(pngs):
    """``memory://`` is one of this engine's stores; pylance's pyarrow filesystems lack it."""
    from lance_format.io import ObjectStore

    store = ObjectStore("memory://images-test")
    store.write_bytes("a.png", Path(pngs[1]).read_bytes())
    read = ours.ImageURIArray.from_uris(["memory://images-test/a.png", None]).read_uris()  # type: ignore[list-item]
    assert read.storage.to_pylist() == [Path(pngs[1]).read_bytes(), None]


def test_tensor_and_encoded_round_trip_like_pylance(pngs):
    encoded_ours = ours.ImageURIArray.from_uris(pngs).read_uris()
    encoded_theirs = theirs.ImageURIArray.from_uris(pngs).read_uris()
    tensor_ours, tensor_theirs = encoded_ours.to_tensor(), encoded_theirs.to_tensor()
    assert tensor_ours.type.shape == list(tensor_theirs.type.shape) or tuple(tensor_ours.type.shape) == \
        tuple(tensor_theirs.type.shape)
    assert tensor_ours.storage.equals(tensor_theirs.storage)
    assert tensor_ours.storage.type == pa.list_(pa.uint8(), 2 * 3 * 4)
    np.testing.assert_array_equal(tensor_ours.to_numpy(), tensor_theirs.to_numpy())
    assert tensor_ours.to_numpy().shape == (3, 2, 3, 4)
    # PNG through Pillow and back gives the same pixels
    assert tensor_ours.to_encoded().to_tensor().storage.equals(tensor_ours.storage)
    custom = tensor_ours.to_encoded(lambda pixels: pa.array([p.tobytes() for p in pixels], pa.binary()))
    assert custom.storage[0].as_py() == tensor_ours.to_numpy()[0].tobytes()
    decoded = encoded_ours.to_tensor(lambda images: np.stack([np.zeros((1, 2), np.int16)] * len(images)))
    assert decoded.type.shape == (1, 2) and decoded.storage.type == pa.list_(pa.int16(), 2)
    ragged = ours.ImageURIArray.from_uris(pngs[:1]).read_uris()
    Image.fromarray(np.zeros((5, 5, 4), np.uint8)).save(pngs[2])
    mixed = ours.ImageURIArray.from_uris([pngs[0], pngs[2]]).read_uris()
    with pytest.raises(ValueError):
        mixed.to_tensor()
    assert len(ragged.to_tensor()) == 1


@pytest.mark.parametrize("writer", ENGINES, ids=lambda m: m.__name__)
@pytest.mark.parametrize("reader", ENGINES, ids=lambda m: m.__name__)
def test_image_columns_round_trip_between_engines(tmp_path, pngs, writer, reader):
    uris = ours.ImageURIArray.from_uris(pngs)
    encoded = uris.read_uris()
    table = pa.table({"uri": uris, "image": encoded, "pixels": encoded.to_tensor()})
    writer.write_dataset(table, tmp_path / "t")
    back = reader.dataset(tmp_path / "t").take([2, 0])
    expected = table.take([2, 0])
    assert back.to_pylist() == expected.to_pylist()
    for name in table.column_names:
        assert back.schema.field(name).type.extension_name == table.schema.field(name).type.extension_name
        assert back.schema.field(name).type.storage_type == table.schema.field(name).type.storage_type
    assert tuple(back.column("pixels").type.shape) == (2, 3, 4)


def test_image_arrays_pickle(pngs):
    uris = ours.ImageURIArray.from_uris(pngs)
    for array in (uris, uris.read_uris(), uris.read_uris().to_tensor()):
        again = pickle.loads(pickle.dumps(array))
        assert again.type == array.type and again.storage.equals(array.storage)


def test_ours_alone_registers_image_types_and_reads_them_back(tmp_path, pngs):
    script = (
        "import sys, pyarrow as pa, lance_format, lance_format.arrow as arrow\n"
        "assert 'lance' not in sys.modules\n"
        f"uris = arrow.ImageURIArray.from_uris({pngs!r})\n"
        f"lance_format.write_dataset(pa.table({{'u': uris, 'px': uris.read_uris().to_tensor()}}), {str(tmp_path / 't')!r})\n"
        f"t = lance_format.dataset({str(tmp_path / 't')!r}).to_table()\n"
        "print(type(t.column('u').chunk(0)).__name__, type(t.column('px').chunk(0)).__name__, t.column('px').type.shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ImageURIArray", "FixedShapeImageTensorArray", "[2,", "3,", "4]"]


# -- bfloat16 -------------------------------------------------------------------------------------

def _our_class(array: pa.Array) -> pa.Array:
    """``array`` as our BFloat16Array (in this process pyarrow builds pylance's: it registered first)."""
    return pa.ExtensionArray.from_storage(ours.BFloat16Type(), array.storage)


def test_bfloat16_values_print_and_compare_like_pylance():
    values = [1.1, None, 3.4, -2.0]
    a, b = _both(lambda m: m.bfloat16_array(values))
    a = _our_class(a)
    assert type(a) is ours.BFloat16Array
    assert [repr(v) for v in a.to_pylist()] == [repr(v) for v in b.to_pylist()] == ["1.1015625", "None", "3.40625", "-2"]
    assert str(a) == str(b)
    assert repr(a).split("\n", 1)[1] == repr(b).split("\n", 1)[1] and repr(a).startswith("<lance.arrow.BFloat16Array")
    long_a, long_b = _both(lambda m: m.bfloat16_array([float(i) for i in range(30)]))
    long_a = _our_class(long_a)
    assert str(long_a) == str(long_b) and "..." in str(long_a)
    assert a[0] == ours.BFloat16(1.1) and a[0] != ours.BFloat16(1.0) and not (a[0] == 1.1015625)
    assert a[0].as_py() == ours.BFloat16(1.1)


def test_bfloat16_numpy_like_pylance():
    from ml_dtypes import bfloat16

    a, b = _both(lambda m: m.bfloat16_array([1.1, 2.1, 3.4]))
    a = _our_class(a)
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    assert a.to_numpy().dtype == bfloat16
    # a slice gives its own values (pylance 14's to_numpy ignores the slice offset and returns all)
    assert a.slice(1).to_numpy().tolist() == b.to_numpy().tolist()[1:]
    assert ours.BFloat16Array.from_numpy(b.to_numpy()).storage.equals(b.storage)
    assert _our_class(ours.BFloat16Array.from_numpy(np.array([1.0, 2.0], bfloat16)))[1] == bfloat16(2.0)
    with pytest.raises(ValueError, match="null"):
        _our_class(ours.bfloat16_array([1.0, None])).to_numpy()
    with pytest.raises(InvalidInputError, match="multi-dimensional"):
        ours.BFloat16Array.from_numpy(np.zeros((2, 2), bfloat16))
    # our bfloat16 arrays also take plain floats (pylance takes bfloat16 arrays only)
    assert ours.BFloat16Array.from_numpy(np.array([1.1], np.float32)).storage.equals(b.storage.slice(0, 1))
