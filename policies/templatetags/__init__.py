"""Template filters: what Django's autoescaping does not cover (it escapes HTML, not control or
bidi characters). Loaded by name in the templates that show text from policies and clusters."""
