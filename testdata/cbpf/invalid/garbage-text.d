this is not a program
