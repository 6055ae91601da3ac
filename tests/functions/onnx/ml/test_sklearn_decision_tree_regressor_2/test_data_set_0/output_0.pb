BvariableJ8ïÊyBïÊùÁÃôp¿Ãôð>B­ÃB-CÈÕ|CÈÕüÂ†S^Â†SÞA:‰GB:‰ÇÁ+
Á+
•@