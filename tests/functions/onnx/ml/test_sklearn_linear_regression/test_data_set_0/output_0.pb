BvariableJîRBİ…ˆÂsî¬Ã~®Cé
<Ã
4vBdGB