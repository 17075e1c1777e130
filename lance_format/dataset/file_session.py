"""The file session of ``LanceDataset.new_file_session()``: pylance's ``lance.file`` session API,
implemented in :mod:`lance_format.file.api` (re-exported here for the dataset layer)."""

from lance_format.file.api import LanceFileReader, LanceFileSession, LanceFileWriter, ListResult, ReaderResults

__all__ = ["LanceFileSession", "LanceFileReader", "LanceFileWriter", "ReaderResults", "ListResult"]
