"""The trained claims of the book, one module per chapter (chNN.py), each with a list CLAIMS of margins.Claim."""
