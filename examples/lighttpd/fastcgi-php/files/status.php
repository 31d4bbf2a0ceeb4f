<?php
http_response_code(418);
header("Content-Type: text/plain");
header("Cache-Control: no-store");
echo "short and stout\n";
