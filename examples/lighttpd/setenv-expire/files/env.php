<?php
foreach (["HTTP_X_ADDED", "HTTP_X_SET", "HTTP_USER_AGENT", "APP_ENV", "APP_MODE", "HTTP_X_GONE"] as $k)
    echo $k, "=", isset($_SERVER[$k]) ? $_SERVER[$k] : "(unset)", "\n";
