"""The app's view of a remote ``helmdeck controller``: attached to it (its Package objects shown as packages,
actions made requests on them) and its pulses (its metrics read for the app's P view). Drives nothing."""
