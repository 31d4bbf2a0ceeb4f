<?php
foreach (["REQUEST_URI", "REDIRECT_URI", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING"] as $k)
    echo $k, "=", isset($_SERVER[$k]) ? $_SERVER[$k] : "(unset)", "\n";
