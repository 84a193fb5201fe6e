"""The `fedgen-debug` command line. Flags only build the library's config objects."""
