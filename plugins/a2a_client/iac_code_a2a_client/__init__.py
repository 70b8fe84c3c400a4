"""``iac-code a2a-client``: call remote A2A agents, built on a2a-sdk's client (see :mod:`iac_code_a2a_client.commands`)."""
