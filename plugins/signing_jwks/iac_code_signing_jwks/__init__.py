"""Asymmetric Agent Card signing with rotation and a published JWKS."""
