"""Lance v2 data files: the container (footer, metadata tables) and the 2.0 reader and writer."""

from lance_format.file.reader import ColumnPlan, LanceFileReader
from lance_format.file.writer import LanceFileWriter, WrittenFile

__all__ = ["ColumnPlan", "LanceFileReader", "LanceFileWriter", "WrittenFile"]
