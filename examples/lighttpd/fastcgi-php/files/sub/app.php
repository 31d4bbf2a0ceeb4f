<?php echo "in sub: ", $_SERVER["SCRIPT_NAME"], " ", $_SERVER["PATH_INFO"] ?? "-", "\n";
