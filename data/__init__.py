"""The GloVe subset the book ships, installed as the package data ``attn_helpers.data`` (see PROVENANCE.md)."""
