<?php
// Only what both servers must agree on (not ports or server names).
foreach (["SCRIPT_NAME", "PATH_INFO", "PATH_TRANSLATED", "QUERY_STRING", "REQUEST_URI",
          "REQUEST_METHOD", "SCRIPT_FILENAME", "DOCUMENT_ROOT", "CONTENT_LENGTH",
          "HTTP_X_TEST", "GATEWAY_INTERFACE", "SERVER_PROTOCOL"] as $k)
    echo $k, "=", $_SERVER[$k] ?? "-", "\n";
