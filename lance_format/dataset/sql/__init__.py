"""SQL filter predicates (pylance's DataFusion dialect) translated to ``pyarrow.compute`` expressions."""
