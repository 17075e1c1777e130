"""pydantic models as table schemas and rows, like pylance's ``lance.pydantic``."""

from __future__ import annotations

import enum
from datetime import date, datetime

import lance
import lance.pydantic
import pyarrow as pa
import pydantic
import pytest

import lance_format
import lance_format.pydantic


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


def _models(vector, enums: bool = True):
    class Address(pydantic.BaseModel):
        city: str
        zip_code: int | None = None

    class CustomerRecord(pydantic.BaseModel):
        id: int
        email: str | None
        score: float
        active: bool
        avatar: bytes | None = None
        signup: date
        seen: datetime
        tags: list[str]
        maybe_scores: list[float | None]
        address: Address
        embedding: vector(4)

    if not enums:
        return CustomerRecord, Address

    class CustomerRecord(CustomerRecord):  # noqa: F811 - the same model with enum fields
        color: Color
        level: Level

    return CustomerRecord, Address


def _rows(model, address, enums: bool = True):
    extra = lambda i: {"color": Color.RED if i % 2 else Color.BLUE, "level": Level.HIGH} if enums else {}  # noqa: E731
    return [model(**extra(i), id=i, email=f"c{i}@example.com" if i % 2 else None, score=i / 3, active=bool(i % 2),
                  signup=date(2024, 1, 1 + i), seen=datetime(2024, 1, 1, 12, i), tags=["a", "b"][: i % 3],
                  maybe_scores=[1.0, None], address=address(city=f"city{i}", zip_code=i if i else None),
                  embedding=[0.5, 1.0, 1.5, float(i)])
            for i in range(4)]


def test_schema_like_pylance():
    ours, _ = _models(lance_format.pydantic.Vector)
    theirs, _ = _models(lance.pydantic.Vector)
    assert lance_format.pydantic.pydantic_to_schema(ours) == lance.pydantic.pydantic_to_schema(theirs)


def test_from_pydantic_model_like_pylance(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = {}
    for name, engine, vector in (("ours", lance_format, lance_format.pydantic.Vector),
                                 ("pylance", lance, lance.pydantic.Vector)):
        model, address = _models(vector, enums=False)  # pylance 14 fails to write enum values
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        ds = engine.LanceDataset.from_pydantic_model(model, _rows(model, address, enums=False))
        results[name] = (ds.schema, lance.dataset("customer_record").to_table())
    assert results["ours"][0] == results["pylance"][0]
    assert results["ours"][1].equals(results["pylance"][1])


def test_enum_fields_are_written_as_their_values(tmp_path):
    model, address = _models(lance_format.pydantic.Vector)
    path = str(tmp_path / "c.lance")
    lance_format.LanceDataset.from_pydantic_model(model, _rows(model, address), path)
    table = lance.dataset(path).to_table(columns=["color", "level"])
    assert table.column("color").to_pylist() == ["blue", "red", "blue", "red"]
    assert table.column("level").to_pylist() == [2, 2, 2, 2]


def test_refusals_like_pylance():
    class Bare(pydantic.BaseModel):
        values: list

    class Odd(pydantic.BaseModel):
        value: complex

    for engine in (lance.pydantic, lance_format.pydantic):
        for model in (Bare, Odd):
            with pytest.raises(TypeError):
                engine.pydantic_to_schema(model)
    model, _ = _models(lance_format.pydantic.Vector)
    with pytest.raises(ValueError):
        lance_format.LanceDataset.from_pydantic_model(model, [], "x.lance")
    with pytest.raises(TypeError):
        lance_format.LanceDataset.from_pydantic_model(model, [{"id": 1}], "x.lance")
    with pytest.raises(TypeError):
        lance_format.LanceDataset.from_pydantic_model(dict, [{}], "x.lance")
    assert lance_format.pydantic.pydantic_to_schema(model).field("embedding").type == pa.list_(pa.float32(), 4)


def test_write_dataset_takes_a_list_of_models_like_pylance(tmp_path):
    """``write_dataset([Model(...), ...])`` derives the schema from the model class, so an Optional
    field that is None in every row keeps its type; a schema= given wins."""
    class Visit(pydantic.BaseModel):
        url: str
        email: str | None
        avatar: bytes | None = None
        tags: list[str]
        when: datetime

    rows = [Visit(url=f"https://example.com/p/{i}", email=f"u{i}@example.org" if i % 3 else None,
                  tags=["new"] * (i % 2), when=datetime(2024, 5, 1, i)) for i in range(5)]
    ours = lance_format.write_dataset(rows, str(tmp_path / "ours"))
    theirs = lance.write_dataset(rows, str(tmp_path / "theirs"))
    assert ours.schema == theirs.schema and ours.schema.field("avatar").type == pa.binary()
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(theirs.to_table())

    class Score(pydantic.BaseModel):
        who: str
        score: float

    narrow = pa.schema([pa.field("who", pa.string()), pa.field("score", pa.float32())])
    ds = lance_format.write_dataset([Score(who="a@example.com", score=0.5)], str(tmp_path / "s"), schema=narrow)
    assert ds.schema == narrow


def test_lists_with_other_items_are_refused_like_pylance(tmp_path):
    class Record(pydantic.BaseModel):
        name: str

    class Subclass(Record):
        extra: int = 0

    class Other(pydantic.BaseModel):
        x: int

    for bad in ({"name": "eve"}, Other(x=1), Subclass(name="bob")):
        data = [Record(name="alice"), bad]
        for engine in (lance, lance_format):
            with pytest.raises(TypeError, match=r"data\[1\] must be an instance of .* exactly"):
                engine.write_dataset(data, str(tmp_path / "w"))
            with pytest.raises(TypeError, match=r"data\[1\]"):
                engine.LanceDataset.from_pydantic_model(Record, data, uri=str(tmp_path / "m"))
    for engine in (lance, lance_format):
        with pytest.raises(TypeError, match="must be provided as a list"):
            engine.LanceDataset.from_pydantic_model(Record, (Record(name=n) for n in "ab"), uri=str(tmp_path / "g"))
    assert not (tmp_path / "w").exists() and not (tmp_path / "m").exists()
