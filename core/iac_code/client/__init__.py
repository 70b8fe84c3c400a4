"""``iac-code a2a-client``: the client side, built on a2a-sdk's client (see :mod:`iac_code.client.commands`)."""
