"""`fedgen_debug.app`: the Streamlit app, installed from the card's `app/`.

The app reads the run store only: it never trains and never sees raw client examples.
"""
