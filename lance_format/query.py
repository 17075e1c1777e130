"""pylance's ``lance.query``: the full-text query objects ``full_text_query`` accepts (see
:mod:`lance_format.index.scalar.fts_query`)."""

from lance_format.index.scalar.fts_query import (
    BooleanQuery,
    BoostQuery,
    CombinedFieldsQuery,
    DocumentGranularity,
    FullTextOperator,
    FullTextQuery,
    FullTextQueryType,
    MatchQuery,
    MultiMatchQuery,
    Occur,
    PhraseQuery,
)

__all__ = ["BooleanQuery", "BoostQuery", "CombinedFieldsQuery", "DocumentGranularity", "FullTextOperator", "FullTextQuery",
           "FullTextQueryType", "MatchQuery", "MultiMatchQuery", "Occur", "PhraseQuery"]
