"""Lance schemas: field trees with stable ids, and their Arrow and protobuf forms."""

from lance_format.schema.fields import LanceField, LanceSchema, check_arrow_compatible
from lance_format.schema.json_schema import json_to_schema, schema_to_json
from lance_format.schema.logical_types import arrow_type_of, logical_type_of

__all__ = ["LanceField", "LanceSchema", "check_arrow_compatible", "arrow_type_of", "logical_type_of", "json_to_schema",
           "schema_to_json"]
