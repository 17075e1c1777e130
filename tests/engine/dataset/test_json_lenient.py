"""pylance 14's lenient JSON grammar for ``arrow.json`` documents, call for call: the documents
its parser accepts beyond JSON are stored as the identical JSONB bytes and read back as the
same text, and the ones it refuses are refused here too (nothing written)."""

from __future__ import annotations

import glob

import lance
import pyarrow as pa
import pytest
from lance.file import LanceFileReader

import lance_format
from lance_format.errors import InvalidInputError
from lance_format.schema.json_lenient import parse_lenient
from lance_format.schema.jsonb import encode_text, encode_value, parse_text

JSON = pa.json_(pa.string())

# found by writing each document with pylance 14 (one write per document)
ACCEPTED = [
    '+1', '01', '00', '-01', '007', '.5', '1.', '-.5', '+.5', '1.e5', 'nan', 'NaN', 'infinity', 'Infinity',
    '+Infinity', '+NaN', '[1,]', '[,1]', '[1,,2]', '[,]', '0x10', "'a'", '{a:1}', 'True', 'TRUE', 'Null', 'nULL',
    '"\\uD83D"', '\t1\n', "'single'", '["a",]', '-0.0e0', '0e0', '1E+2', '1e-0', '100e-2',
    '123456789012345678901234567890.5', '-123456789012345678901234567890', '1e-400', '[true,false,]', '[[1,],]',
    '+0', '-0', '0.', '00.5', '1e01', '1e+01', '+1e5', '[+1,+2.5]', '{"a":+1}', '[01,02]',
    '[NaN,Infinity,-Infinity]', '[nan]', '{"a":NaN}', '[.5]', '[1.]', '  ', '\n', '[\n]', '"\\/"', '"tab\there"',
    '[-0]', '-0.0', '1E400', '1e308', '2e308', '[Infinity]', 'Infinity ', 'NaN ', '[ ,]', '[1 ,]', '0x1F', '0X1f',
    '-0x10', '0x1.8', '-0x1.8', '0x1e5', '0xFFFFFFFFFFFFFFFF', '0x10000000000000000', '-0x8000000000000000',
    '-0x8000000000000001', '123456789012345678901234567890123456789',
    '1234567890123456789012345678901234567890123456789012345678901234567890123456789.5', "{'a':'b'}", '{$a:1}',
    '{é:1}', '{_:1}', '[1,,]', '"\\u{0041}"', '"\\uD83D\\uDE00"', '"\\uD83D\\u0041"', '"\\uDE00"', '"\\uD83Dx"',
    'tRuE', 'FALSE', 'NULL', 'NAN', 'INFINITY', '-Infinity', '[1 \\n ,2]', '\\t[1]\\n', '\\x0C1', '1\x0c',
    '["a"\n,\n"b"]', "{a:1,b:[,],c:'x'}", '{a$_9:null}', '[0.,-0.,+0.]', '[1e5,1E-5,.5e1,5.e-1]', '\'"\'', '"\'"',
    "''", "{'':1}", '[\\r1]', '\\n', '1\\n', '[1]\\t\\n', '{"a":1\\n}', '9223372036854775808',
    '-9223372036854775808', '-9223372036854775809', '18446744073709551616', '-0x0', '+0x5', '[True,FALSE,Null]',
    '{ a : 1 }', '{"k":\'v\'}', '"\\ud83d\\ude00x\\udE00"',
]

REFUSED = [
    '1e', '1e+', 'inf', 'Inf', '-inf', '-NaN', '{"a":1,}', '{,}', '1_000', 'tru', '//c\n1', '/*c*/1', '1 //c',
    '"\\x41"', '"\\\'"', '"\\u00"', '"\\a"', '[1 2]', '{"a" 1}', '{"a":1 "b":2}', '-', '+', '--1', '1e5.5', '- 1',
    '\xa01', '1\xa0', '\ufeff1', '[1]]', '[1]x', '1,2', '[1];', '"a""b"', '"unterminated', '{"a":[1,],}', '.e1',
    'NaN1', 'Infinityx', 'nul', ',', '+-1', '1.5.5', '-', '{}}', '{"a":1}}', '[]]', '0x', '00x1', '0x1.', '0xG',
    '1.2.3', '{a b:1}', '{1a:1}', "{'a':1,'a':2}", "['x\\'y']", '"\\u{1F600}"', '"\\u12"', '"abc\\"', '-nan',
    '+inf', '+-Infinity', '[-]', '{"a":}', '{"a"}', '\x0b1', '{"":1,\'\':2}', '\\', '\\x0c1', '0.0e', '0x.8',
    '[nul]', '{k:v}', '["a"b]', "'unterminated",
]


def _table(docs: list[str]) -> pa.Table:
    return pa.table({"j": pa.array(docs, pa.string()).cast(JSON)})


def _raw_jsonb(path: str) -> list[bytes]:
    values: list[bytes] = []
    for data_file in sorted(glob.glob(f"{path}/data/*.lance")):
        values += LanceFileReader(data_file).read_all().to_table()["j"].to_pylist()
    return values


def test_accepted_documents_are_stored_and_read_like_pylance(tmp_path):
    lance.write_dataset(_table(ACCEPTED), str(tmp_path / "theirs"))
    lance_format.write_dataset(_table(ACCEPTED), str(tmp_path / "ours"))
    theirs = _raw_jsonb(str(tmp_path / "theirs"))
    for doc, stored in zip(ACCEPTED, theirs):
        assert encode_text(doc) == stored, doc
    assert _raw_jsonb(str(tmp_path / "ours")) == theirs
    expected = lance.dataset(str(tmp_path / "theirs")).to_table()["j"].to_pylist()
    for path in ("theirs", "ours"):
        assert lance_format.dataset(str(tmp_path / path)).to_table()["j"].to_pylist() == expected
        assert lance.dataset(str(tmp_path / path)).to_table()["j"].to_pylist() == expected


@pytest.mark.parametrize("doc", REFUSED)
def test_refused_documents_are_refused_like_pylance(tmp_path, doc):
    with pytest.raises(OSError, match="Failed to encode JSON"):
        lance.write_dataset(_table([doc]), str(tmp_path / "theirs"))
    with pytest.raises(InvalidInputError, match="Failed to encode JSON"):
        lance_format.write_dataset(_table([doc]), str(tmp_path / "ours"))
    assert not (tmp_path / "ours" / "_versions").exists()


def test_lenient_grammar_agrees_with_strict_json_on_standard_documents():
    """Standard JSON takes Python's parser; the lenient one must store the same JSONB for it."""
    docs = ['{"b":[1,-2,3.5,"x",null,true,false],"a":{"c":{}}}', "18446744073709551615", "-9223372036854775808",
            "1e400", "[NaN,-Infinity]", '"h\\u00e9\\ud83d\\ude00\\n"', "12345678901234567890123456789012345678901",
            "0.1", "-0.0", '  [ 1 , { "k" : [ ] } ]  ']
    for doc in docs:
        assert encode_value(parse_lenient(doc)) == encode_value(parse_text(doc)), doc


def test_lone_surrogates_keep_their_text_as_written():
    assert parse_text('"\\uD83D"') == "\\uD83D"
    assert parse_text('["\\udE00", "\\uD83D\\u0041"]') == ["\\udE00", "\\uD83D\\u0041"]
