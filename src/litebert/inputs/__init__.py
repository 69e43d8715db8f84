"""Opening what users give as input: text files (compressed or not, with errors naming file, line and byte offset:
`text`), tables (Parquet, Arrow, `datasets` folders, texts given in Python: `columnar`) and zstd streams (`zstd`)."""
