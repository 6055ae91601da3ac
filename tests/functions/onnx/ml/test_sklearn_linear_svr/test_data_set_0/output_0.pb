BvariableJöRBØ…ˆÂrî¬Ãy®Cä
<Ãü3vBSGB