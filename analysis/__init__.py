"""Everything that reads result files and concludes; it never imports training code."""
