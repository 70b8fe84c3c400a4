"""Push notifications: the encrypted config store, the URL guard, the keyring, signing and the delivery worker."""
