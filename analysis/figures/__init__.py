"""One module per figure: a function from a tidy DataFrame to PNG and PDF files."""
