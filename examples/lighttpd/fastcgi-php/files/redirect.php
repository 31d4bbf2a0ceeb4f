<?php
header("Location: /info.php?from=redirect");
