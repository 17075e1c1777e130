"""pylance's private ``lance._dataset`` package, whose ``sharded_batch_iterator`` users import:
see :mod:`.sharded_batch_iterator`."""
