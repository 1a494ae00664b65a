module offhours.dev/launcher

go 1.22
