"""The server side of each provider's wire format, for kova's fake servers (test scaffolding,
kept out of the production codecs)."""
