<?php
foreach (["REMOTE_USER", "AUTH_TYPE"] as $k)
    echo $k, "=", isset($_SERVER[$k]) ? $_SERVER[$k] : "(unset)", "\n";
